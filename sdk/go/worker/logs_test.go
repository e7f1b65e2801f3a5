package worker

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestLongLinesAreCutSayingSo(t *testing.T) {
	var b logBuffer
	b.add("info", strings.Repeat("x", MaxLogLine+10), time.Now())
	line := b.drain(false)[0]
	if n := len([]rune(*line.Message)); n != MaxLogLine || !strings.HasSuffix(*line.Message, " [line truncated]") {
		t.Fatalf("line of %d characters: ...%q", n, (*line.Message)[n-20:])
	}
	if *line.Level != "INFO" || line.At == nil {
		t.Fatalf("level and time: %+v", line)
	}
}

func TestAHeartbeatShipsAtMostTheAPIsBoundAndKeepsTheRest(t *testing.T) {
	var b logBuffer
	for i := range MaxLogLines + 5 {
		b.add("INFO", "line", time.Now().Add(time.Duration(i)))
	}
	if got := len(b.drain(false)); got != MaxLogLines {
		t.Fatalf("first shipment %d lines, want %d", got, MaxLogLines)
	}
	if b.waitingSince().IsZero() {
		t.Fatal("the rest waits for the next shipment")
	}
	if got := len(b.drain(false)); got != 5 {
		t.Fatalf("second shipment %d lines, want 5", got)
	}
	if !b.waitingSince().IsZero() {
		t.Fatal("nothing waits any more")
	}
}

func TestTheResultCutsWhatDoesNotFitAndCountsIt(t *testing.T) {
	var b logBuffer
	for range MaxLogLines + 5 {
		b.add("INFO", "line", time.Now())
	}
	lines := b.drain(true)
	if len(lines) != MaxLogLines {
		t.Fatalf("%d lines, want %d", len(lines), MaxLogLines)
	}
	if last := *lines[len(lines)-1].Message; last != "[6 log lines dropped by the worker: too many at once]" {
		t.Fatalf("last line %q", last)
	}
}

func TestPastTheBufferLinesAreCountedNotKept(t *testing.T) {
	var b logBuffer
	big := strings.Repeat("y", MaxLogLine)
	for range maxBufferedChars/MaxLogLine + 3 {
		b.add("INFO", big, time.Now())
	}
	lines := b.drain(false)
	if got := *lines[len(lines)-1].Message; got != "[3 log lines dropped by the worker: too many at once]" {
		t.Fatalf("last line %q", got)
	}
	b.putBack(lines[:2])
	if got := len(b.drain(false)); got != 2 {
		t.Fatalf("lines put back go out next: %d", got)
	}
}

func TestTheTaskLoggerKeepsInfoAndAbove(t *testing.T) {
	task := newTask(testLeased(), slog.New(slog.DiscardHandler), time.Now())
	task.Logger().Debug("not kept")
	task.Logger().Info("charging", "amount", 12)
	task.Logger().Warn("slow bank")
	task.Log("parcel with %d items", 3)
	lines := task.logs.drain(true)
	var got []string
	for _, line := range lines {
		got = append(got, *line.Level+" "+*line.Message)
	}
	want := []string{
		"INFO charging amount=12",
		"WARNING slow bank",
		"INFO parcel with 3 items",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q, want %q", got, want)
	}
}

package worker

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/sluiceway/sluiceway/sdk/go/api"
)

// The API's bounds on logs, and the buffer's own (docs/logs.md).
const (
	MaxLogLine        = 8192        // characters of one line; longer ones are cut, saying so
	MaxLogLines       = 1000        // lines one heartbeat or result carries
	maxBufferedChars  = 1024 * 1024 // per task between shipments: past it lines are counted, not kept
	lineTruncatedMark = " [line truncated]"
	maxLevelChars     = 16
)

// logBuffer holds a task's lines until a heartbeat or its result ships them.
type logBuffer struct {
	mu      sync.Mutex
	lines   []api.LogLine
	size    int
	dropped int
	oldest  time.Time // when the oldest waiting line was logged; zero when none waits
}

func (b *logBuffer) add(level, message string, at time.Time) {
	text := truncate(message, MaxLogLine, lineTruncatedMark)
	level = strings.ToUpper(level)
	if len(level) > maxLevelChars {
		level = level[:maxLevelChars]
	}
	stamp := at.UTC().Format(time.RFC3339Nano)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.size+len(text) > maxBufferedChars {
		b.dropped++
		return
	}
	b.lines = append(b.lines, api.LogLine{At: &stamp, Level: &level, Message: &text})
	b.size += len(text)
	if b.oldest.IsZero() {
		b.oldest = at
	}
}

// drain takes the waiting lines, oldest first, at most MaxLogLines (the
// API's bound on one shipment), with a line counting what was dropped. A
// heartbeat leaves the rest for the next one; the result (final) is the last
// shipment, so what does not fit is counted as dropped.
func (b *logBuffer) drain(final bool) []api.LogLine {
	b.mu.Lock()
	defer b.mu.Unlock()
	room := MaxLogLines
	if b.dropped > 0 {
		room-- // for the notice
	}
	take := min(len(b.lines), room)
	lines := b.lines[:take:take]
	b.lines = b.lines[take:]
	for _, line := range lines {
		b.size -= len(*line.Message)
	}
	dropped := b.dropped
	b.dropped = 0
	if final && len(b.lines) > 0 {
		dropped += len(b.lines)
		b.lines, b.size = nil, 0
	}
	if dropped > 0 {
		if len(lines) == MaxLogLines {
			dropped++
			lines = lines[:MaxLogLines-1]
		}
		lines = append(lines, notice(fmt.Sprintf("[%d log lines dropped by the worker: too many at once]", dropped)))
	}
	if len(b.lines) == 0 {
		b.oldest = time.Time{}
	}
	return lines
}

func notice(message string) api.LogLine {
	level := "WARNING"
	return api.LogLine{Level: &level, Message: &message}
}

// putBack returns lines a failed shipment did not deliver, first in line.
func (b *logBuffer) putBack(lines []api.LogLine) {
	if len(lines) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(append([]api.LogLine{}, lines...), b.lines...)
	for _, line := range lines {
		if line.Message != nil {
			b.size += len(*line.Message)
		}
	}
	if b.oldest.IsZero() {
		b.oldest = time.Now()
	}
}

// waitingSince is when the oldest unshipped line was logged (zero: none).
func (b *logBuffer) waitingSince() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.oldest
}

// taskHandler is a slog.Handler that keeps records in a task's buffer and
// passes them on to the worker's own logger (which may drop them).
type taskHandler struct {
	buffer *logBuffer
	next   slog.Handler
	attrs  []slog.Attr
	groups string
}

func (h *taskHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= slog.LevelInfo || h.next.Enabled(ctx, level)
}

func (h *taskHandler) Handle(ctx context.Context, record slog.Record) error {
	if record.Level >= slog.LevelInfo {
		var text strings.Builder
		text.WriteString(record.Message)
		write := func(attr slog.Attr) bool {
			fmt.Fprintf(&text, " %s%s=%v", h.groups, attr.Key, attr.Value)
			return true
		}
		for _, attr := range h.attrs {
			write(attr)
		}
		record.Attrs(write)
		at := record.Time
		if at.IsZero() {
			at = time.Now()
		}
		h.buffer.add(levelName(record.Level), text.String(), at)
	}
	if h.next.Enabled(ctx, record.Level) {
		return h.next.Handle(ctx, record)
	}
	return nil
}

func (h *taskHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &taskHandler{buffer: h.buffer, next: h.next.WithAttrs(attrs), attrs: append(append([]slog.Attr{}, h.attrs...), attrs...), groups: h.groups}
}

func (h *taskHandler) WithGroup(name string) slog.Handler {
	return &taskHandler{buffer: h.buffer, next: h.next.WithGroup(name), attrs: h.attrs, groups: h.groups + name + "."}
}

// levelName is the level as the server's log lines spell it (Python's names).
func levelName(level slog.Level) string {
	switch {
	case level >= slog.LevelError:
		return "ERROR"
	case level >= slog.LevelWarn:
		return "WARNING"
	case level >= slog.LevelInfo:
		return "INFO"
	}
	return "DEBUG"
}

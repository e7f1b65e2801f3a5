package worker

import (
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/sluiceway/sluiceway/sdk/go/api"
)

func testLeased() api.LeasedTask {
	traceparent := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	return api.LeasedTask{
		TaskId: "t-1", Epoch: 4, TaskType: "charge", ExecutionId: "r-1", ReferenceName: "pay", Attempt: 2,
		Input: map[string]any{"amount": json.Number("9007199254740993")}, HeartbeatTimeoutSeconds: 30,
		ResponseTimeoutSeconds: 3600, Traceparent: &traceparent,
	}
}

func TestATaskAsTheHandlerSeesIt(t *testing.T) {
	now := time.Now()
	task := newTask(testLeased(), slog.New(slog.DiscardHandler), now)
	if task.IdempotencyKey() != "r-1/pay" {
		t.Fatalf("idempotency key %q", task.IdempotencyKey())
	}
	if task.Traceparent != "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" {
		t.Fatalf("traceparent %q", task.Traceparent)
	}
	var input struct{ Amount int64 }
	if err := task.DecodeInput(&input); err != nil || input.Amount != 9007199254740993 {
		t.Fatalf("input decoded exactly: %v %v", input.Amount, err)
	}
	// Beats a third of the tightest deadline; the lease is surely gone after it.
	if task.beatInterval() != 10*time.Second || !task.leaseDeadline().Equal(now.Add(30*time.Second)) {
		t.Fatalf("beat every %v, lease until %v", task.beatInterval(), task.leaseDeadline().Sub(now))
	}
	task.UpsertSearchAttributes(map[string]any{"stage": "paid"})
	task.UpsertSearchAttributes(map[string]any{"amount": 3})
	if got := task.searchAttributes(); len(got) != 2 || got["stage"] != "paid" {
		t.Fatalf("attributes %v", got)
	}
}

package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/sluiceway/sluiceway/sdk/go/api"
)

// Task is one leased task as a handler sees it.
type Task struct {
	ID            string
	Epoch         int
	TaskType      string
	ExecutionID   string // the run
	ReferenceName string // the task's name in its workflow
	Attempt       int
	// Input is the task's input. Numbers arrive as json.Number, exact;
	// DecodeInput reads the input into a struct of your own instead.
	Input map[string]any
	// Traceparent is the attempt's W3C trace context ("" when the operator
	// exports no traces): continue it to join your spans to the run's trace.
	Traceparent         string
	HeartbeatTimeout    time.Duration // 0: none
	ResponseTimeout     time.Duration
	StartToCloseTimeout time.Duration // 0: none

	logs   *logBuffer
	logger *slog.Logger

	mu         sync.Mutex
	attributes map[string]any
	lastBeat   time.Time // when the server last renewed the lease (or leased it)
}

func newTask(leased api.LeasedTask, logger *slog.Logger, now time.Time) *Task {
	task := &Task{
		ID: leased.TaskId, Epoch: leased.Epoch, TaskType: leased.TaskType,
		ExecutionID: leased.ExecutionId, ReferenceName: leased.ReferenceName,
		Attempt: leased.Attempt, Input: leased.Input,
		HeartbeatTimeout:    time.Duration(leased.HeartbeatTimeoutSeconds) * time.Second,
		ResponseTimeout:     time.Duration(leased.ResponseTimeoutSeconds) * time.Second,
		StartToCloseTimeout: time.Duration(leased.StartToCloseTimeoutSeconds) * time.Second,
		logs:                &logBuffer{},
		lastBeat:            now,
	}
	if task.Input == nil {
		task.Input = map[string]any{}
	}
	if leased.Traceparent != nil {
		task.Traceparent = *leased.Traceparent
	}
	// The worker's own log names the task; the task's log needs not (the server keys it).
	named := logger.Handler().WithAttrs([]slog.Attr{
		slog.String("run", task.ExecutionID), slog.String("task", task.ID), slog.Int("epoch", task.Epoch),
	})
	task.logger = slog.New(&taskHandler{buffer: task.logs, next: named})
	return task
}

// IdempotencyKey is the same for every attempt and delivery of this task in
// its run: give it to side effects. (The task id names one attempt only.)
func (t *Task) IdempotencyKey() string { return t.ExecutionID + "/" + t.ReferenceName }

// Logger logs into this task's log, kept by the server with the run (lines
// at INFO and above; they ship with heartbeats and the result), and to the
// worker's logger.
func (t *Task) Logger() *slog.Logger { return t.logger }

// Log keeps one line at INFO in this task's log.
func (t *Task) Log(format string, args ...any) {
	t.logs.add("INFO", fmt.Sprintf(format, args...), time.Now())
}

// DecodeInput reads the task's input into v, as encoding/json would.
func (t *Task) DecodeInput(v any) error {
	raw, err := json.Marshal(t.Input)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}

// UpsertSearchAttributes sets attributes the run's workflow declares; they
// are written with this task's result.
func (t *Task) UpsertSearchAttributes(values map[string]any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.attributes == nil {
		t.attributes = map[string]any{}
	}
	maps.Copy(t.attributes, values)
}

func (t *Task) searchAttributes() map[string]any {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.attributes)
}

func (t *Task) beat(now time.Time) {
	t.mu.Lock()
	t.lastBeat = now
	t.mu.Unlock()
}

// leaseBound is the tightest of the deadlines a heartbeat renews.
func (t *Task) leaseBound() time.Duration {
	bound := time.Duration(0)
	for _, b := range []time.Duration{t.HeartbeatTimeout, t.ResponseTimeout} {
		if b > 0 && (bound == 0 || b < bound) {
			bound = b
		}
	}
	return bound
}

// beatInterval is a third of the tightest deadline a beat renews.
func (t *Task) beatInterval() time.Duration {
	bound := t.leaseBound()
	if bound == 0 {
		return time.Minute
	}
	return max(200*time.Millisecond, bound/3)
}

// leaseDeadline is when the lease is surely gone: the server renews it for
// the tightest of its timeouts from the last heartbeat, at most.
func (t *Task) leaseDeadline() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	bound := t.leaseBound()
	if bound == 0 {
		bound = time.Hour
	}
	return t.lastBeat.Add(bound)
}

func (t *Task) String() string {
	return fmt.Sprintf("run %s task %s epoch %d", t.ExecutionID, t.ID, t.Epoch)
}

type taskKey struct{}

// FromContext returns the task a handler's context belongs to.
func FromContext(ctx context.Context) (*Task, bool) {
	task, ok := ctx.Value(taskKey{}).(*Task)
	return task, ok
}

// Package worker runs task handlers against the Sluiceway API with the
// Python SDK's behaviour (docs/workers.md, docs/sdk-go.md):
//
//   - one long poll per task type, asking for as many tasks as it has free slots;
//   - heartbeats for every in-flight task in one request; a task the server
//     reports gone has its context canceled and its result dropped;
//   - results in batches, whose request also leases the slots they free
//     (`next`), retried with backoff and jitter until the server answers or
//     the lease is surely gone; a result refused as invalid (422) is reported
//     FAILED with the server's reason once; 404/409/413 are not sent again;
//   - on the end of Run's context: stop polling, give in-flight handlers the
//     grace period, then cancel them and hand their tasks back INTERRUPTED
//     (a task leased then and never started goes back as a zero snooze).
package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/sluiceway/sluiceway/sdk/go/api"
	"github.com/sluiceway/sluiceway/sdk/go/auth"
)

// Handler does one task. Its context ends when the task is no longer this
// worker's (gone, past startToCloseTimeout, or shutdown's grace ran out).
// Return the output (nil is {}), or an error: TerminalError, RetryAfterError,
// SnoozeError, or any other error (FAILED with its message).
type Handler func(ctx context.Context, task *Task) (map[string]any, error)

// Options configure a Worker. URL and Namespace are required.
type Options struct {
	URL         string
	Namespace   string
	WorkerID    string // default: hostname-pid
	Credentials auth.Credentials
	HTTPClient  *http.Client
	// PollTimeout is how long a poll waits on the server for work (10 s).
	PollTimeout time.Duration
	// ShutdownGrace is how long in-flight handlers may finish after Run's
	// context ends before their tasks are handed back INTERRUPTED (30 s).
	ShutdownGrace time.Duration
	ResultBatch   int        // results per request, at most 1000 (100)
	Classifier    Classifier // refines plain errors for every task type
	// Logger receives the worker's own lines (default slog.Default()); a
	// task's Logger passes its lines on to it too.
	Logger *slog.Logger
	// NoLeaseWithResults stops results from leasing their slots' next tasks
	// in the same request; the long poll then fills them.
	NoLeaseWithResults bool
	// LogFlush is how long a logged line may wait for a heartbeat (1 s).
	LogFlush time.Duration
}

// OptionsFromEnv reads SLUICEWAY_URL, SLUICEWAY_NAMESPACE, SLUICEWAY_WORKER_ID,
// SLUICEWAY_SHUTDOWN_GRACE (seconds) and the credentials' variables.
func OptionsFromEnv() (Options, error) {
	opts := Options{
		URL: os.Getenv("SLUICEWAY_URL"), Namespace: os.Getenv("SLUICEWAY_NAMESPACE"),
		WorkerID: os.Getenv("SLUICEWAY_WORKER_ID"), Credentials: auth.FromEnv(),
	}
	if grace := os.Getenv("SLUICEWAY_SHUTDOWN_GRACE"); grace != "" {
		seconds, err := time.ParseDuration(grace + "s")
		if err != nil || seconds < 0 {
			return opts, fmt.Errorf("SLUICEWAY_SHUTDOWN_GRACE: want seconds, got %q", grace)
		}
		opts.ShutdownGrace = seconds
	}
	return opts, nil
}

// Option configures one registration.
type Option func(*registration)

// Concurrency sets how many tasks of the type run at once (default 1).
func Concurrency(n int) Option { return func(r *registration) { r.concurrency = n } }

// WithClassifier refines this type's plain errors before the worker's classifier.
func WithClassifier(c Classifier) Option { return func(r *registration) { r.classifier = c } }

type registration struct {
	taskType    string
	handler     Handler
	concurrency int
	classifier  Classifier
	inFlight    int
	reserved    int           // finished slots whose result's request leases their next task
	freed       chan struct{} // a slot came free (capacity 1)
}

func (r *registration) free() int { return r.concurrency - r.inFlight - r.reserved }

// running is an in-flight task and how to stop it.
type running struct {
	task    *Task
	cancel  context.CancelCauseFunc
	done    chan struct{}
	settled bool // its result was taken, or it was handed back or abandoned
}

// report is a result on its way, with the slot it holds until its request
// leased that slot's next task.
type report struct {
	task     *Task
	body     api.TaskResult
	fallback bool // already the bare FAILED that replaces a refused result
	slot     *registration
}

// Worker polls, runs handlers and reports. Create with New, add handlers
// with Register, then Run.
type Worker struct {
	opts   Options
	api    *api.Client
	log    *slog.Logger
	types  map[string]*registration
	mu     sync.Mutex
	tasks  map[string]*running
	queue  []*report
	wake   chan struct{} // the result flusher has work
	closed bool          // no results after those queued
	giveUp time.Time     // at shutdown: stop retrying results then

	stopping chan struct{} // Run's context ended
}

var (
	errGone        = errors.New("sluiceway: the task is no longer this worker's")
	errInterrupted = errors.New("sluiceway: the worker shut down")
)

// New checks the options and makes a Worker.
func New(opts Options) (*Worker, error) {
	if opts.URL == "" || opts.Namespace == "" {
		return nil, errors.New("sluiceway: a worker needs the API's URL and a namespace (SLUICEWAY_URL, SLUICEWAY_NAMESPACE)")
	}
	if opts.WorkerID == "" {
		host, _ := os.Hostname()
		opts.WorkerID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if opts.PollTimeout <= 0 {
		opts.PollTimeout = 10 * time.Second
	}
	if opts.ShutdownGrace <= 0 {
		opts.ShutdownGrace = 30 * time.Second
	}
	if opts.ResultBatch <= 0 {
		opts.ResultBatch = 100
	}
	opts.ResultBatch = min(opts.ResultBatch, MaxBatch)
	if opts.LogFlush <= 0 {
		opts.LogFlush = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Transport: http.DefaultTransport}
	}
	client, err := api.NewClient(opts.URL, api.WithHTTPClient(opts.HTTPClient), api.WithRequestEditorFn(opts.Credentials.Editor()))
	if err != nil {
		return nil, err
	}
	return &Worker{
		opts: opts, api: client, log: opts.Logger, types: map[string]*registration{},
		tasks: map[string]*running{}, wake: make(chan struct{}, 1), stopping: make(chan struct{}),
	}, nil
}

// Register adds the handler of a task type.
func (w *Worker) Register(taskType string, handler Handler, options ...Option) error {
	r := &registration{taskType: taskType, handler: handler, concurrency: 1, freed: make(chan struct{}, 1)}
	for _, option := range options {
		option(r)
	}
	if r.concurrency < 1 {
		return fmt.Errorf("sluiceway: %s: concurrency must be at least 1", taskType)
	}
	if _, taken := w.types[taskType]; taken {
		return fmt.Errorf("sluiceway: task type %q already has a handler", taskType)
	}
	w.types[taskType] = r
	return nil
}

// Run works until ctx ends, then shuts down gracefully and returns nil.
// Cancel ctx on SIGTERM (signal.NotifyContext) to get the protocol's
// graceful shutdown.
func (w *Worker) Run(ctx context.Context) error {
	if len(w.types) == 0 {
		return ErrNoHandlers
	}
	// The handlers' and requests' own context: it outlives ctx by the grace period.
	work, stopWork := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopWork(errInterrupted)
	flushed := make(chan struct{})
	go func() { defer close(flushed); w.flushResults(work) }()
	beatCtx, stopBeats := context.WithCancel(work)
	beaten := make(chan struct{})
	go func() { defer close(beaten); w.heartbeats(beatCtx) }()
	var polls sync.WaitGroup
	for _, r := range w.types {
		polls.Go(func() { w.poll(work, r) })
	}
	w.log.Info("worker polling", "worker", w.opts.WorkerID, "types", slices.Sorted(mapsKeys(w.types)), "namespace", w.opts.Namespace)
	<-ctx.Done()
	close(w.stopping)
	w.log.Info("worker stopping: finishing in-flight tasks", "worker", w.opts.WorkerID, "inFlight", w.inFlight())
	// The grace period starts now, while the polls on their way end (within
	// PollTimeout; what they lease now goes straight back as a zero snooze).
	w.drain()
	polls.Wait()
	w.mu.Lock()
	w.giveUp = time.Now().Add(w.opts.ShutdownGrace)
	w.closed = true
	w.mu.Unlock()
	w.signal()
	<-flushed
	stopBeats()
	<-beaten
	return nil
}

func mapsKeys(m map[string]*registration) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func (w *Worker) isStopping() bool {
	select {
	case <-w.stopping:
		return true
	default:
		return false
	}
}

func (w *Worker) inFlight() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.tasks)
}

// -- polling ---------------------------------------------------------------

func (w *Worker) poll(ctx context.Context, r *registration) {
	failures := 0
	for !w.isStopping() {
		w.mu.Lock()
		free := r.free()
		w.mu.Unlock()
		if free <= 0 {
			select {
			case <-r.freed:
			case <-w.stopping:
			}
			continue
		}
		// The poll is not canceled by shutdown: tasks it leased would be lost
		// until their leases expire. It ends within PollTimeout and hands them back.
		leased, err := w.pollOnce(ctx, r.taskType, free)
		if err != nil {
			delay := jittered(failures)
			failures++
			w.log.Warn("poll failed; retrying", "type", r.taskType, "error", err, "in", delay)
			select {
			case <-time.After(delay):
			case <-w.stopping:
			}
			continue
		}
		failures = 0
		w.start(ctx, leased)
	}
}

func (w *Worker) pollOnce(ctx context.Context, taskType string, count int) ([]api.LeasedTask, error) {
	seconds := float32(w.opts.PollTimeout.Seconds())
	ctx, cancel := context.WithTimeout(ctx, w.opts.PollTimeout+30*time.Second)
	defer cancel()
	resp, err := w.api.PollV1NsNamespaceTasksPollPost(ctx, w.opts.Namespace, api.PollRequest{
		TaskTypes: []string{taskType}, WorkerId: w.opts.WorkerID, Count: &count, PollTimeoutSeconds: &seconds,
	})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if err := api.ErrorFrom(resp); err != nil {
		return nil, err
	}
	var answer api.PollResponse
	if err := api.DecodeJSON(resp, &answer); err != nil {
		return nil, err
	}
	return answer.Tasks, nil
}

// start runs what was leased; during shutdown it hands it straight back.
func (w *Worker) start(ctx context.Context, leased []api.LeasedTask) {
	now := time.Now()
	for _, body := range leased {
		task := newTask(body, w.log, now)
		w.mu.Lock()
		r := w.types[task.TaskType]
		if w.isStopping() || r == nil {
			w.mu.Unlock()
			result := api.TaskResult{TaskId: task.ID, Epoch: task.Epoch, Status: statusInProgress, CallbackAfterSeconds: ptr(float32(0))}
			w.enqueue(&report{task: task, body: result})
			continue
		}
		r.inFlight++
		taskCtx, cancel := context.WithCancelCause(context.WithValue(ctx, taskKey{}, task))
		entry := &running{task: task, cancel: cancel, done: make(chan struct{})}
		w.tasks[task.ID] = entry
		w.mu.Unlock()
		go w.execute(taskCtx, r, entry)
	}
}

func (w *Worker) execute(ctx context.Context, r *registration, entry *running) {
	defer close(entry.done)
	task := entry.task
	if task.StartToCloseTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, task.StartToCloseTimeout,
			fmt.Errorf("startToCloseTimeout (%s) passed", task.StartToCloseTimeout))
		defer cancel()
	}
	output, err := call(ctx, r.handler, task)
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		err = context.Cause(ctx) // say why the context ended, not just "canceled"
	}
	classifier := ComposeClassifiers(r.classifier, w.opts.Classifier)
	result := withLogs(task, outcome(task, output, err, classifier), true)
	w.mu.Lock()
	defer w.mu.Unlock()
	if entry.settled { // handed back at shutdown, or gone: its result is not ours to send
		return
	}
	entry.settled = true
	delete(w.tasks, task.ID)
	r.inFlight--
	if errors.Is(context.Cause(ctx), errGone) {
		w.freed(r)
		return
	}
	rep := &report{task: task, body: result}
	if !w.opts.NoLeaseWithResults {
		r.reserved++
		rep.slot = r
	} else {
		w.freed(r)
	}
	w.queue = append(w.queue, rep)
	w.signal()
}

// withLogs adds what the task logged (and, with its outcome, the search
// attributes it upserted) to its result.
func withLogs(task *Task, result api.TaskResult, attributes bool) api.TaskResult {
	if lines := task.logs.drain(true); len(lines) > 0 {
		result.Logs = &lines
	}
	if values := task.searchAttributes(); attributes && len(values) > 0 {
		result.SearchAttributes = &values
	}
	return result
}

// call runs the handler; a panic is a failure of the task, never of the worker.
func call(ctx context.Context, handler Handler, task *Task) (output map[string]any, err error) {
	defer func() {
		if recovered := recover(); recovered != nil {
			output, err = nil, fmt.Errorf("panic: %v", recovered)
		}
	}()
	return handler(ctx, task)
}

// freed tells r's poll a slot came free (w.mu held).
func (w *Worker) freed(r *registration) {
	select {
	case r.freed <- struct{}{}:
	default:
	}
}

func (w *Worker) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *Worker) enqueue(rep *report) {
	w.mu.Lock()
	w.queue = append(w.queue, rep)
	w.mu.Unlock()
	w.signal()
}

// drain waits up to the grace period for in-flight tasks, then cancels the
// rest and hands them back INTERRUPTED.
func (w *Worker) drain() {
	deadline := time.After(w.opts.ShutdownGrace)
	w.mu.Lock()
	entries := make([]*running, 0, len(w.tasks))
	for _, entry := range w.tasks {
		entries = append(entries, entry)
	}
	w.mu.Unlock()
waiting:
	for _, entry := range entries {
		select {
		case <-entry.done:
		case <-deadline:
			break waiting
		}
	}
	w.mu.Lock()
	handed := 0
	for id, entry := range w.tasks {
		entry.settled = true
		entry.cancel(errInterrupted)
		delete(w.tasks, id)
		w.types[entry.task.TaskType].inFlight--
		body := withLogs(entry.task, api.TaskResult{TaskId: entry.task.ID, Epoch: entry.task.Epoch, Status: statusInterrupted}, false)
		w.queue = append(w.queue, &report{task: entry.task, body: body})
		handed++
	}
	w.mu.Unlock()
	w.signal()
	if handed > 0 {
		w.log.Info("handed back unfinished tasks", "count", handed)
	}
}

// -- results ---------------------------------------------------------------

// flushResults sends queued results in batches, up to 4 requests at once,
// until the queue is closed and empty.
func (w *Worker) flushResults(ctx context.Context) {
	room := make(chan struct{}, 4)
	var sending sync.WaitGroup
	for {
		w.mu.Lock()
		if len(w.queue) == 0 {
			done := w.closed
			w.mu.Unlock()
			if done {
				sending.Wait()
				w.mu.Lock()
				empty := len(w.queue) == 0 // a `next` answered during shutdown may have queued hand-backs
				w.mu.Unlock()
				if empty {
					return
				}
				continue
			}
			<-w.wake
			continue
		}
		w.mu.Unlock()
		time.Sleep(2 * time.Millisecond) // results of one poll batch finish together
		w.mu.Lock()
		take := min(len(w.queue), w.opts.ResultBatch)
		batch := slices.Clone(w.queue[:take])
		w.queue = w.queue[take:]
		w.mu.Unlock()
		room <- struct{}{}
		sending.Go(func() {
			defer func() { <-room }()
			w.sendBatch(ctx, batch)
		})
	}
}

func (w *Worker) sendBatch(ctx context.Context, batch []*report) {
	counts := map[string]any{}
	if !w.isStopping() {
		for _, rep := range batch {
			if rep.slot != nil {
				n, _ := counts[rep.slot.taskType].(int)
				counts[rep.slot.taskType] = n + 1
			}
		}
	}
	defer w.unreserve(batch)
	w.send(ctx, batch, counts)
}

// unreserve gives the slots the batch held back to the polls.
func (w *Worker) unreserve(batch []*report) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, rep := range batch {
		if rep.slot != nil {
			rep.slot.reserved--
			w.freed(rep.slot)
			rep.slot = nil
		}
	}
}

// send delivers every result of the batch, or learns that its lease is gone.
// The first request also leases counts (the slots the results free).
func (w *Worker) send(ctx context.Context, batch []*report, counts map[string]any) {
	pending, failures := batch, 0
	for pending = w.stillLeased(pending); len(pending) > 0; pending = w.stillLeased(pending) {
		var next *api.NextLease
		if len(counts) > 0 {
			next = &api.NextLease{WorkerId: w.opts.WorkerID, Counts: counts}
			counts = nil // asked once: a retry only delivers
		}
		outcomes, leased, err := w.postResults(ctx, pending, next)
		if next != nil {
			// The leased tasks take their slots before the slots go back to
			// the polls, which would otherwise ask for them too.
			w.start(ctx, leased)
			w.unreserve(batch)
		}
		var refusal *api.Error
		switch {
		case errors.As(err, &refusal) && !refusal.Retryable():
			pending = w.oneByOne(ctx, pending, refusal)
			continue
		case err != nil:
			failures = w.pause(ctx, failures, pending, err)
			continue
		}
		again := w.settle(pending, outcomes)
		if slices.ContainsFunc(again, func(r *report) bool { return slices.Contains(pending, r) }) {
			failures = w.pause(ctx, failures, again, errors.New("some results were not applied"))
		}
		pending = again
	}
}

type resultsRequest struct {
	Results []api.TaskResult `json:"results"`
	Next    *api.NextLease   `json:"next,omitempty"`
}

func (w *Worker) postResults(ctx context.Context, pending []*report, next *api.NextLease) ([]api.ItemOutcome, []api.LeasedTask, error) {
	body := resultsRequest{Next: next}
	for _, rep := range pending {
		body.Results = append(body.Results, rep.body)
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	resp, err := w.api.ReportResultsV1NsNamespaceTasksResultsPostWithBody(ctx, w.opts.Namespace, "application/json", bytes.NewReader(raw))
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if err := api.ErrorFrom(resp); err != nil {
		return nil, nil, err
	}
	var answer api.ResultBatchResponse
	if err := api.DecodeJSON(resp, &answer); err != nil {
		return nil, nil, err
	}
	var leased []api.LeasedTask
	if answer.Tasks != nil {
		leased = *answer.Tasks
	}
	return answer.Results, leased, nil
}

// oneByOne finds the item a whole-request refusal was about: alone, its
// refusal is its own, handled as an invalid item.
func (w *Worker) oneByOne(ctx context.Context, pending []*report, refusal *api.Error) []*report {
	if len(pending) > 1 {
		w.log.Warn("results refused together; sending them one by one", "count", len(pending), "error", refusal)
		for _, rep := range pending {
			w.send(ctx, []*report{rep}, nil)
		}
		return nil
	}
	message := refusal.Error()
	return w.settle(pending, []api.ItemOutcome{{Code: 422, Error: &message}})
}

// settle is what is left to send after the server's per-item answers.
func (w *Worker) settle(sent []*report, outcomes []api.ItemOutcome) []*report {
	var again []*report
	for i, rep := range sent {
		if i >= len(outcomes) {
			again = append(again, rep)
			continue
		}
		code, message := outcomes[i].Code, ""
		if outcomes[i].Error != nil {
			message = *outcomes[i].Error
		}
		switch {
		case code == 200:
		case code == 404 || code == 409:
			w.log.Info("result not applied, the lease is gone", "task", rep.task.String(), "error", message)
		case code == 413: // the server failed the task: its output is over the payload limit
			w.log.Error("result over the payload limit; the server failed the task", "task", rep.task.String(), "error", message)
		case code == 422 && rep.fallback:
			w.log.Error("even a bare FAILED was refused; dropped", "task", rep.task.String(), "error", message)
		case code == 422:
			w.log.Warn("result refused as invalid; reporting it FAILED with the reason", "task", rep.task.String(), "status", rep.body.Status, "error", message)
			again = append(again, &report{task: rep.task, body: refused(rep.body, message), fallback: true})
		default:
			again = append(again, rep) // the server's trouble: send it again
		}
	}
	return again
}

// stillLeased drops results whose lease is surely gone, or whose shutdown ended.
func (w *Worker) stillLeased(pending []*report) []*report {
	now := time.Now()
	w.mu.Lock()
	giveUp := w.giveUp
	w.mu.Unlock()
	var live []*report
	for _, rep := range pending {
		if now.Before(rep.task.leaseDeadline()) && (giveUp.IsZero() || now.Before(giveUp)) {
			live = append(live, rep)
		} else {
			w.log.Error("result could not be delivered before the lease ran out or shutdown ended; the server will hand the task out again", "task", rep.task.String())
		}
	}
	return live
}

func (w *Worker) pause(ctx context.Context, failures int, pending []*report, err error) int {
	delay := jittered(failures)
	w.log.Warn("reporting results failed; retrying", "error", err, "in", delay, "results", len(pending), "first", pending[0].task.String())
	select {
	case <-time.After(delay):
	case <-ctx.Done():
	}
	return failures + 1
}

// -- heartbeats ------------------------------------------------------------

type heartbeatsRequest struct {
	Heartbeats []api.Heartbeat `json:"heartbeats"`
}

func (w *Worker) heartbeats(ctx context.Context) {
	ticker := time.NewTicker(200 * time.Millisecond)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		now := time.Now()
		due := w.dueBeats(now)
		for start := 0; start < len(due); start += MaxBatch {
			w.beat(ctx, due[start:min(start+MaxBatch, len(due))], now)
		}
	}
}

// dueBeats are the tasks whose lease needs renewing, or whose lines waited too long.
func (w *Worker) dueBeats(now time.Time) []*Task {
	w.mu.Lock()
	defer w.mu.Unlock()
	var due []*Task
	for _, entry := range w.tasks {
		task := entry.task
		task.mu.Lock()
		last := task.lastBeat
		task.mu.Unlock()
		waiting := task.logs.waitingSince()
		if now.Sub(last) >= task.beatInterval() || (!waiting.IsZero() && now.Sub(waiting) >= w.opts.LogFlush) {
			due = append(due, task)
		}
	}
	return due
}

func (w *Worker) beat(ctx context.Context, due []*Task, now time.Time) {
	body := heartbeatsRequest{}
	shipped := map[string][]api.LogLine{}
	for _, task := range due {
		beat := api.Heartbeat{TaskId: task.ID, Epoch: task.Epoch}
		if lines := task.logs.drain(false); len(lines) > 0 {
			shipped[task.ID] = lines
			beat.Logs = &lines
		}
		body.Heartbeats = append(body.Heartbeats, beat)
	}
	answer, err := w.postHeartbeats(ctx, body)
	if err != nil {
		w.log.Warn("heartbeat failed; retrying", "error", err, "tasks", len(due))
		for _, task := range due {
			task.logs.putBack(shipped[task.ID])
		}
		return
	}
	for _, task := range due {
		if slices.Contains(answer.Alive, task.ID) {
			task.beat(now)
		}
	}
	if answer.Errors != nil {
		for _, refused := range *answer.Errors {
			w.log.Error("heartbeat refused as invalid", "task", deref(refused.TaskId), "error", deref(refused.Error))
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range answer.Gone {
		if entry, ok := w.tasks[id]; ok {
			w.log.Warn("task is no longer ours (timed out, canceled or re-leased); abandoning it", "task", entry.task.String())
			entry.cancel(errGone)
		}
	}
}

func (w *Worker) postHeartbeats(ctx context.Context, body heartbeatsRequest) (*api.HeartbeatBatchResponse, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := w.api.HeartbeatsV1NsNamespaceTasksHeartbeatsPostWithBody(ctx, w.opts.Namespace, "application/json", bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if err := api.ErrorFrom(resp); err != nil {
		return nil, err
	}
	var answer api.HeartbeatBatchResponse
	return &answer, api.DecodeJSON(resp, &answer)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

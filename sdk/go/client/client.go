// Package client starts Sluiceway runs and waits for their outcome over the
// public HTTP API (POST .../executions?wait=, GET .../executions/{id}?wait=).
// The wait happens on the server, which answers when the run ends, in steps
// of at most a minute.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/sluiceway/sluiceway/sdk/go/api"
	"github.com/sluiceway/sluiceway/sdk/go/auth"
)

// waitStep is one server-side wait: the API's bound.
const waitStep = time.Minute

// Run is a run as the server reports it.
type Run = api.ExecutionView

// ErrRunFailed and ErrStillRunning are matched with errors.Is; errors.As
// gives the *RunFailedError or *StillRunningError with the run's details.
var (
	ErrRunFailed    = errors.New("sluiceway: the run did not complete")
	ErrStillRunning = errors.New("sluiceway: the run is still running")
)

// RunFailedError: the run ended FAILED, TIMED_OUT or TERMINATED.
type RunFailedError struct {
	RunID  string
	Status api.RunStatus
	Reason string
	Output map[string]any
}

func (e *RunFailedError) Error() string {
	reason := e.Reason
	if reason == "" {
		reason = "no reason given"
	}
	return fmt.Sprintf("run %s %s: %s", e.RunID, e.Status, reason)
}

func (e *RunFailedError) Is(target error) bool { return target == ErrRunFailed }

// StillRunningError: the timeout passed before the run ended. The run goes
// on: RunID names it, to Wait again. It also matches context.DeadlineExceeded.
type StillRunningError struct {
	RunID   string
	Status  api.RunStatus
	Timeout time.Duration
}

func (e *StillRunningError) Error() string {
	return fmt.Sprintf("run %s still %s after %s", e.RunID, e.Status, e.Timeout)
}

func (e *StillRunningError) Is(target error) bool {
	return target == ErrStillRunning || target == context.DeadlineExceeded
}

// Client works with the runs of one namespace.
type Client struct {
	api       *api.Client
	namespace string
	now       func() time.Time
}

// Option configures a Client.
type Option func(*settings)

type settings struct {
	credentials auth.Credentials
	http        *http.Client
}

// WithCredentials sets the token, token file or API key requests carry.
func WithCredentials(c auth.Credentials) Option { return func(s *settings) { s.credentials = c } }

// WithToken sends a bearer token.
func WithToken(token string) Option { return func(s *settings) { s.credentials.Token = token } }

// WithAPIKey sends an API key (X-API-Key).
func WithAPIKey(key string) Option { return func(s *settings) { s.credentials.APIKey = key } }

// WithHTTPClient sends requests through c (its Timeout, if any, must allow a
// minute's wait).
func WithHTTPClient(c *http.Client) Option { return func(s *settings) { s.http = c } }

// New makes a Client for the API at url, working in namespace.
func New(url, namespace string, options ...Option) (*Client, error) {
	s := settings{http: &http.Client{}}
	for _, option := range options {
		option(&s)
	}
	generated, err := api.NewClient(url, api.WithHTTPClient(s.http), api.WithRequestEditorFn(s.credentials.Editor()))
	if err != nil {
		return nil, err
	}
	return &Client{api: generated, namespace: namespace, now: time.Now}, nil
}

// StartOptions are a start's optional fields.
type StartOptions struct {
	// RequestID makes the start idempotent: a start sent again with the same
	// id returns the run the first one created (sent as Idempotency-Key too).
	RequestID     string
	Version       int // 0: the latest
	CorrelationID string
	Priority      *int
}

// Start starts a run without waiting: the server's answer (id, status, created).
func (c *Client) Start(ctx context.Context, workflow string, input map[string]any, opts StartOptions) (*api.StartResponse, error) {
	var answer api.StartResponse
	if _, err := c.start(ctx, workflow, input, opts, 0, &answer); err != nil {
		return nil, err
	}
	return &answer, nil
}

// Get returns a run (without its tasks).
func (c *Client) Get(ctx context.Context, runID string) (*Run, error) {
	return c.get(ctx, runID, 0)
}

// Wait returns the run once it ended, or a *StillRunningError after timeout.
func (c *Client) Wait(ctx context.Context, runID string, timeout time.Duration) (*Run, error) {
	deadline := c.now().Add(timeout)
	for {
		run, err := c.get(ctx, runID, c.step(deadline))
		if err != nil {
			return nil, err
		}
		if ended(run.Status) {
			return run, nil
		}
		if !c.now().Before(deadline) {
			return nil, &StillRunningError{RunID: runID, Status: run.Status, Timeout: timeout}
		}
	}
}

// Execute starts a run and waits for it: its output once it completes; a
// *RunFailedError if it ends otherwise; a *StillRunningError when timeout
// passes first. The start carries a request id (a new one unless given), so
// a start sent again after a refused wait finds the same run.
func (c *Client) Execute(ctx context.Context, workflow string, input map[string]any, timeout time.Duration, opts StartOptions) (map[string]any, error) {
	run, err := c.StartAndWait(ctx, workflow, input, timeout, opts)
	if err != nil {
		return nil, err
	}
	output := map[string]any{}
	if run.Output != nil {
		output = *run.Output
	}
	if run.Status != "COMPLETED" {
		reason := ""
		if run.ReasonForIncompletion != nil {
			reason = *run.ReasonForIncompletion
		}
		return nil, &RunFailedError{RunID: run.Id, Status: run.Status, Reason: reason, Output: output}
	}
	return output, nil
}

// StartAndWait is Execute's start and wait: the run once it ended, however
// it ended, or a *StillRunningError.
func (c *Client) StartAndWait(ctx context.Context, workflow string, input map[string]any, timeout time.Duration, opts StartOptions) (*Run, error) {
	deadline := c.now().Add(timeout)
	if opts.RequestID == "" {
		opts.RequestID = uuid.NewString()
	}
	var run Run
	if _, err := c.start(ctx, workflow, input, opts, c.step(deadline), &run); err != nil {
		return nil, err
	}
	if ended(run.Status) {
		return &run, nil
	}
	if !c.now().Before(deadline) {
		return nil, &StillRunningError{RunID: run.Id, Status: run.Status, Timeout: timeout}
	}
	ended, err := c.Wait(ctx, run.Id, deadline.Sub(c.now()))
	var still *StillRunningError
	if errors.As(err, &still) {
		still.Timeout = timeout
	}
	return ended, err
}

func ended(status api.RunStatus) bool {
	switch status {
	case "COMPLETED", "FAILED", "TIMED_OUT", "TERMINATED":
		return true
	}
	return false
}

// step is the next server-side wait: what is left, at most the API's bound.
func (c *Client) step(deadline time.Time) time.Duration {
	return max(0, min(waitStep, deadline.Sub(c.now())))
}

func waitParam(wait time.Duration) *string {
	if wait <= 0 {
		return nil
	}
	text := fmt.Sprintf("%.3fs", wait.Seconds())
	return &text
}

func (c *Client) start(ctx context.Context, workflow string, input map[string]any, opts StartOptions, wait time.Duration, into any) (int, error) {
	if input == nil {
		input = map[string]any{}
	}
	body := api.StartRequest{Name: workflow, Input: &input, Priority: opts.Priority}
	params := &api.StartV1NsNamespaceExecutionsPostParams{Wait: waitParam(wait)}
	if opts.RequestID != "" {
		body.RequestId, params.IdempotencyKey = &opts.RequestID, &opts.RequestID
	}
	if opts.Version > 0 {
		body.Version = &opts.Version
	}
	if opts.CorrelationID != "" {
		body.CorrelationId = &opts.CorrelationID
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	for {
		resp, err := c.api.StartV1NsNamespaceExecutionsPostWithBody(ctx, c.namespace, params, "application/json", bytes.NewReader(raw))
		if err != nil {
			return 0, err
		}
		again, err := c.answer(ctx, resp, into)
		if !again {
			return resp.StatusCode, err
		}
	}
}

func (c *Client) get(ctx context.Context, runID string, wait time.Duration) (*Run, error) {
	id, err := uuid.Parse(runID)
	if err != nil {
		return nil, fmt.Errorf("sluiceway: run id %q: %w", runID, err)
	}
	includeTasks := false
	for {
		resp, err := c.api.GetRun(ctx, c.namespace, id, &api.GetRunParams{IncludeTasks: &includeTasks, Wait: waitParam(wait)})
		if err != nil {
			return nil, err
		}
		var run Run
		again, err := c.answer(ctx, resp, &run)
		if !again {
			if err != nil {
				return nil, err
			}
			return &run, nil
		}
	}
}

// answer reads a response into v. A replica holding all the waiters it may
// (429 TOO_MANY_WAITERS) is asked again after its Retry-After: again is true.
func (c *Client) answer(ctx context.Context, resp *http.Response, v any) (again bool, err error) {
	defer resp.Body.Close()
	if err := api.ErrorFrom(resp); err != nil {
		var refusal *api.Error
		if errors.As(err, &refusal) && refusal.Status == http.StatusTooManyRequests && refusal.Code == "TOO_MANY_WAITERS" {
			delay := time.Duration(max(refusal.RetryAfterSeconds, 1) * float64(time.Second))
			select {
			case <-time.After(delay):
				return true, nil
			case <-ctx.Done():
				return false, ctx.Err()
			}
		}
		return false, err
	}
	return false, api.DecodeJSON(resp, v)
}

// The Go SDK's conformance program (sdk/conformance/README.md):
//
//	conformance worker                              run the handlers until SIGTERM
//	conformance start <workflow> <input-json> <wait-seconds>
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluiceway/sluiceway/sdk/go/api"
	"github.com/sluiceway/sluiceway/sdk/go/auth"
	"github.com/sluiceway/sluiceway/sdk/go/client"
	"github.com/sluiceway/sluiceway/sdk/go/worker"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: conformance worker | conformance start <workflow> <input-json> <wait-seconds>")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "worker":
		if err := runWorker(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "start":
		os.Exit(start(os.Args[2:]))
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}

func runWorker() error {
	opts, err := worker.OptionsFromEnv()
	if err != nil {
		return err
	}
	w, err := worker.New(opts)
	if err != nil {
		return err
	}
	snoozed := &sync.Map{}
	handlers := map[string]worker.Handler{
		"conformance_echo": func(_ context.Context, t *worker.Task) (map[string]any, error) {
			return map[string]any{"echo": t.Input, "attempt": t.Attempt}, nil
		},
		"conformance_flaky": func(_ context.Context, t *worker.Task) (map[string]any, error) {
			if float64(t.Attempt) < number(t.Input["succeedOnAttempt"]) {
				return nil, fmt.Errorf("flaky attempt %d", t.Attempt)
			}
			return map[string]any{"attempt": t.Attempt}, nil
		},
		"conformance_terminal": func(_ context.Context, t *worker.Task) (map[string]any, error) {
			return nil, worker.Terminalf("INVALID_ARGUMENT: %v", t.Input["why"])
		},
		"conformance_retry_after": func(_ context.Context, t *worker.Task) (map[string]any, error) {
			if t.Attempt == 1 {
				return nil, worker.RetryAfter(number(t.Input["seconds"]), nil)
			}
			return map[string]any{"attempt": t.Attempt}, nil
		},
		"conformance_snooze": func(_ context.Context, t *worker.Task) (map[string]any, error) {
			if _, seen := snoozed.LoadOrStore(t.ID, true); !seen {
				return nil, worker.Snooze(number(t.Input["seconds"]))
			}
			return map[string]any{"snoozed": true}, nil
		},
		"conformance_heartbeat": func(ctx context.Context, t *worker.Task) (map[string]any, error) {
			if err := sleep(ctx, number(t.Input["seconds"])); err != nil {
				return nil, err
			}
			return map[string]any{"slept": t.Input["seconds"]}, nil
		},
		"conformance_log": func(_ context.Context, t *worker.Task) (map[string]any, error) {
			t.Logger().Info("first line")
			t.Log("second line %v", t.Input["tag"])
			return map[string]any{}, nil
		},
		"conformance_slow": func(ctx context.Context, t *worker.Task) (map[string]any, error) {
			if err := sleep(ctx, number(t.Input["seconds"])); err != nil {
				return nil, err
			}
			return map[string]any{"attempt": t.Attempt}, nil
		},
		"conformance_big": func(_ context.Context, t *worker.Task) (map[string]any, error) {
			return map[string]any{"blob": strings.Repeat("x", int(number(t.Input["bytes"])))}, nil
		},
		"conformance_trace": func(_ context.Context, t *worker.Task) (map[string]any, error) {
			return map[string]any{"traceparent": t.Traceparent}, nil
		},
		"conformance_attributes": func(_ context.Context, t *worker.Task) (map[string]any, error) {
			t.UpsertSearchAttributes(map[string]any{"stage": t.Input["stage"]})
			return map[string]any{}, nil
		},
	}
	for taskType, handler := range handlers {
		if err := w.Register(taskType, handler, worker.Concurrency(4)); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return w.Run(ctx)
}

// number reads a JSON number of the input (json.Number, exact); 0 when absent.
func number(value any) float64 {
	switch v := value.(type) {
	case json.Number:
		f, _ := v.Float64()
		return f
	case float64:
		return v
	}
	return 0
}

// sleep waits seconds, or until the task's context ends (shutdown's grace ran out).
func sleep(ctx context.Context, seconds float64) error {
	select {
	case <-time.After(time.Duration(seconds * float64(time.Second))):
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func start(args []string) int {
	if len(args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: conformance start <workflow> <input-json> <wait-seconds>")
		return 2
	}
	var input map[string]any
	decoder := json.NewDecoder(strings.NewReader(args[1]))
	decoder.UseNumber()
	if err := decoder.Decode(&input); err != nil {
		fmt.Fprintln(os.Stderr, "input-json:", err)
		return 2
	}
	seconds, err := strconv.ParseFloat(args[2], 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wait-seconds:", err)
		return 2
	}
	c, err := client.New(os.Getenv("SLUICEWAY_URL"), os.Getenv("SLUICEWAY_NAMESPACE"), client.WithCredentials(auth.FromEnv()))
	if err != nil {
		return printed(map[string]any{"error": "client", "message": err.Error()}, 1)
	}
	run, err := c.StartAndWait(context.Background(), args[0], input, time.Duration(seconds*float64(time.Second)), client.StartOptions{})
	var still *client.StillRunningError
	var refusal *api.Error
	switch {
	case errors.As(err, &still):
		return printed(map[string]any{"id": still.RunID, "status": "RUNNING"}, 0)
	case errors.As(err, &refusal):
		return printed(map[string]any{"error": strconv.Itoa(refusal.Status), "message": refusal.Message}, 1)
	case err != nil:
		return printed(map[string]any{"error": "transport", "message": err.Error()}, 1)
	}
	var output any = map[string]any{}
	if run.Output != nil {
		output = *run.Output
	}
	return printed(map[string]any{"id": run.Id, "status": run.Status, "output": output}, 0)
}

func printed(line map[string]any, code int) int {
	raw, _ := json.Marshal(line)
	fmt.Println(string(raw))
	return code
}

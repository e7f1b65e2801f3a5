// The example worker in Go: every task type of examples/workers.py, with the
// same outputs, so the README's example workflows run on it. Configured by
// SLUICEWAY_URL, SLUICEWAY_NAMESPACE (and SLUICEWAY_TOKEN...); runs until SIGTERM.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/sluiceway/sluiceway/sdk/go/worker"
)

func main() {
	opts, err := worker.OptionsFromEnv()
	if err == nil {
		err = run(opts)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(opts worker.Options) error {
	// As examples/workers.py: 429 waited out (Retry-After exactly), connection
	// errors, timeouts and 5xx retried, other 4xx terminal.
	opts.Classifier = worker.ComposeClassifiers(worker.RateLimitAware(worker.Indefinite), worker.FailureTaxonomy())
	w, err := worker.New(opts)
	if err != nil {
		return err
	}
	for _, r := range []struct {
		taskType    string
		handler     worker.Handler
		concurrency int
	}{
		{"charge", charge, 4},
		{"resize_image", resizeImage, 8},
		{"sync_tenant", syncTenant, 4},
		{"export_report", fixed("report"), 1},
		{"sync_inventory", fixed("inventory"), 1},
		{"partner_api", fixed("partner"), 4},
		{"reserve_items", reserveItems, 4},
		{"take_payment", takePayment, 4},
		{"ship_order", shipOrder, 4},
		{"sync_page", syncPage, 1},
	} {
		if err := w.Register(r.taskType, r.handler, worker.Concurrency(r.concurrency)); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return w.Run(ctx)
}

func charge(_ context.Context, t *worker.Task) (map[string]any, error) {
	amount := t.Input["amount"]
	if number(amount) <= 0 {
		return nil, worker.Terminalf("INVALID_ARGUMENT: amount must be positive")
	}
	// A real worker passes t.IdempotencyKey() to the provider: the same for every attempt.
	return map[string]any{"charged": amount, "idempotencyKey": t.IdempotencyKey()}, nil
}

// resizeImage: what each resize logs is kept with its run (`sluiceway logs RUN`).
func resizeImage(ctx context.Context, t *worker.Task) (map[string]any, error) {
	url, width := t.Input["url"], t.Input["width"]
	log := t.Logger()
	log.Info(fmt.Sprintf("resizing %v to %v px wide", url, width))
	if err := sleep(ctx, 500*time.Millisecond); err != nil { // pretend to work
		return nil, err
	}
	log.Info(fmt.Sprintf("thumbnail of %v ready", url))
	return map[string]any{"url": url, "width": width}, nil
}

func syncTenant(ctx context.Context, t *worker.Task) (map[string]any, error) {
	if err := sleep(ctx, 2*time.Second); err != nil {
		return nil, err
	}
	return map[string]any{"tenant": t.Input["tenantId"], "synced": true}, nil
}

// fixed answers {key: "ok"}.
func fixed(key string) worker.Handler {
	return func(context.Context, *worker.Task) (map[string]any, error) {
		return map[string]any{key: "ok"}, nil
	}
}

func reserveItems(_ context.Context, t *worker.Task) (map[string]any, error) {
	items, _ := t.Input["items"].([]any)
	t.Logger().Info(fmt.Sprintf("reserving %d items", len(items)))
	return map[string]any{"reserved": len(items)}, nil
}

func takePayment(_ context.Context, t *worker.Task) (map[string]any, error) {
	amount, card := t.Input["amount"], t.Input["card"]
	if card == nil || card == "" {
		card = "visa"
	}
	t.Logger().Info(fmt.Sprintf("charging %v to %v", orNone(amount), card))
	if card == "declined" {
		return nil, worker.Terminalf("DECLINED: the bank refused the card")
	}
	t.UpsertSearchAttributes(map[string]any{"stage": "paid"})
	return map[string]any{"receipt": "r-" + t.ExecutionID[:min(8, len(t.ExecutionID))], "idempotencyKey": t.IdempotencyKey()}, nil
}

func shipOrder(ctx context.Context, t *worker.Task) (map[string]any, error) {
	if err := sleep(ctx, time.Duration(number(t.Input["seconds"])*float64(time.Second))); err != nil {
		return nil, err
	}
	t.Log("parcel with %v items handed to the carrier", orNone(t.Input["reserved"]))
	t.UpsertSearchAttributes(map[string]any{"stage": "shipped"})
	return map[string]any{"parcel": "p-1"}, nil
}

func syncPage(_ context.Context, t *worker.Task) (map[string]any, error) {
	cursor := 0
	switch v := t.Input["cursor"].(type) {
	case json.Number:
		n, _ := v.Int64()
		cursor = int(n)
	case string:
		cursor, _ = strconv.Atoi(v)
	}
	// examples/09-chain.yaml continues from nextCursor.
	return map[string]any{"synced": cursor, "nextCursor": strconv.Itoa(cursor + 100)}, nil
}

// orNone prints a missing value as Python does.
func orNone(v any) any {
	if v == nil {
		return "None"
	}
	return v
}

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

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

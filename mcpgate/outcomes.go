package mcpgate

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/decisionledger/ledger/client"
	"github.com/decisionledger/ledger/entry"
)

// outcomes records the outcomes of forwarded calls after the agent has
// its answer: the act has happened, so its outcome must reach the log,
// but the agent need not wait for a second durable append. A queue of
// bounded length feeds a few workers; each outcome keeps one idempotency
// key through its retries, so it is recorded once. When the queue is
// full the call records its outcome itself before answering
// (backpressure, never a dropped outcome). Close waits for the queue to
// drain, up to drainTimeout; an outcome still unrecorded then (or
// refused by the ledger) is logged with its entry index, the one thing
// an operator needs to find the act.
type outcomes struct {
	g       *Gateway
	queue   chan outcomeJob
	wg      sync.WaitGroup
	mu      sync.Mutex
	closed  bool
	pending sync.WaitGroup // jobs queued or running
	stop    chan struct{}
}

type outcomeJob struct {
	tool     string
	index    uint64 // the decision's entry, or the consumption's
	consumed *consumedApproval
	result   entry.Result
	key      string
}

const (
	outcomeQueue   = 1024
	outcomeWorkers = 4
	drainTimeout   = 30 * time.Second
	// outcomeBudget bounds the retries of one outcome.
	outcomeBudget = 10 * time.Minute
)

func newOutcomes(g *Gateway) *outcomes {
	o := &outcomes{g: g, queue: make(chan outcomeJob, outcomeQueue), stop: make(chan struct{})}
	for range outcomeWorkers {
		o.wg.Add(1)
		go func() {
			defer o.wg.Done()
			for j := range o.queue {
				o.record(j)
				o.pending.Done()
			}
		}()
	}
	return o
}

// add records j, in the background when the queue has room.
func (o *outcomes) add(j outcomeJob) {
	j.key = randomKey("mcp-outcome-")
	o.mu.Lock()
	if !o.closed {
		// Counted before it is queued: a worker may take it and be done
		// with it before the send returns here.
		o.pending.Add(1)
		select {
		case o.queue <- j:
			o.mu.Unlock()
			return
		default:
			o.pending.Done()
		}
	}
	o.mu.Unlock()
	o.record(j)
}

// record appends one outcome, retrying what may pass on a retry.
func (o *outcomes) record(j outcomeJob) {
	g := o.g
	deadline := time.Now().Add(outcomeBudget)
	backoff := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), g.callTimeout)
		var err error
		if j.consumed != nil {
			_, err = g.ledger.OutcomeIdempotent(ctx, j.key, j.consumed.id, j.consumed.consumption, j.result, "")
		} else {
			_, err = g.ledger.DecisionOutcomeIdempotent(ctx, j.key, j.index, j.result, "")
		}
		cancel()
		if err == nil {
			return
		}
		if !retryable(err) || time.Now().Add(backoff).After(deadline) {
			g.metrics.add(g.metrics.refused, "outcome_unrecorded")
			g.log.Error("outcome not recorded", "tool", j.tool, "index", j.index, "result", string(j.result), "err", ledgerErr(err))
			return
		}
		select {
		case <-time.After(backoff):
		case <-o.stop:
			// Closing: one last try is all that is left.
			backoff = 0
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// retryable says a failed append may pass if tried again.
func retryable(err error) bool {
	var ce *client.Error
	if errors.As(err, &ce) {
		switch ce.Status {
		case http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusInternalServerError, http.StatusBadGateway, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	return !errors.Is(err, client.ErrUnverified)
}

// Flush waits until every queued outcome is recorded or given up.
func (o *outcomes) Flush() { o.pending.Wait() }

// close stops taking jobs and drains the queue, up to drainTimeout.
func (o *outcomes) close() {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return
	}
	o.closed = true
	close(o.queue)
	o.mu.Unlock()
	done := make(chan struct{})
	go func() { o.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(drainTimeout):
		close(o.stop)
		<-done
	}
}

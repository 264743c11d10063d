package ledger

import (
	"sync"
	"testing"
)

// TestTakeJobs checks how a signing worker groups the jobs waiting for it:
// never two pending batches in one group, at most a share of the queue per
// worker, at most maxSignBatch, and never a wait.
func TestTakeJobs(t *testing.T) {
	var a, b sync.WaitGroup // two pending batches
	job := func(wg *sync.WaitGroup) signJob { return signJob{r: &request{}, done: wg} }
	queue := func(jobs ...signJob) chan signJob {
		c := make(chan signJob, 100)
		for _, j := range jobs {
			c <- j
		}
		return c
	}

	// A group stops at the next pending batch, whose first job comes back.
	jobs := queue(job(&a), job(&a), job(&b), job(&b))
	got, next := takeJobs(nil, job(&a), jobs, 1)
	if len(got) != 3 || next.done != &b {
		t.Fatalf("took %d jobs, next of batch b %t; want 3 of batch a, then b", len(got), next.done == &b)
	}
	for i, j := range got {
		if j.done != &a {
			t.Errorf("job %d is not of batch a", i)
		}
	}
	got, next = takeJobs(got[:0], next, jobs, 1)
	if len(got) != 2 || got[0].done != &b || got[1].done != &b || next.r != nil {
		t.Fatalf("took %d jobs, next %v; want the 2 of batch b and no next", len(got), next)
	}

	// With two workers, a worker takes itself and half of what waits.
	jobs = queue(job(&a), job(&a), job(&a), job(&a), job(&a), job(&a), job(&a), job(&a), job(&a), job(&a))
	if got, _ := takeJobs(nil, job(&a), jobs, 2); len(got) != 6 || len(jobs) != 5 {
		t.Errorf("took %d, left %d of 10 waiting with 2 workers; want 6 and 5", len(got), len(jobs))
	}

	// Never more than maxSignBatch.
	jobs = queue()
	for range 3 * maxSignBatch {
		jobs <- job(&a)
	}
	if got, _ := takeJobs(nil, job(&a), jobs, 1); len(got) != maxSignBatch {
		t.Errorf("took %d, want maxSignBatch = %d", len(got), maxSignBatch)
	}

	// An empty queue: the first job alone, without waiting.
	if got, next := takeJobs(nil, job(&a), queue(), 1); len(got) != 1 || next.r != nil {
		t.Errorf("took %d and next %v from an empty queue; want 1 and none", len(got), next)
	}
	// A closed queue: what was waiting, and no next.
	jobs = queue(job(&a))
	close(jobs)
	if got, next := takeJobs(nil, job(&a), jobs, 1); len(got) != 2 || next.r != nil {
		t.Errorf("took %d and next %v from a closed queue of 1; want 2 and none", len(got), next)
	}
}

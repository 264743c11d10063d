package approver

import (
	"os"
	"sync"
	"testing"
	"time"
)

// TestMain lowers the parameters of HashPassword and of the dummy
// verification, so that the tests stay fast; TestDocumentedParams checks
// the production ones.
func TestMain(m *testing.M) {
	hashParams = testParams
	os.Exit(m.Run())
}

var testParams = params{memory: 64, time: 1, threads: 1}

// keyCalls replaces idKey for one test and counts its calls, recording
// their parameters.
type keyCalls struct {
	mu    sync.Mutex
	calls []params
}

func countKeys(t *testing.T) *keyCalls {
	t.Helper()
	k := &keyCalls{}
	real := idKey
	idKey = func(password, salt []byte, time, memory uint32, threads uint8, keyLen uint32) []byte {
		k.mu.Lock()
		k.calls = append(k.calls, params{memory, time, threads})
		k.mu.Unlock()
		return real(password, salt, time, memory, threads, keyLen)
	}
	t.Cleanup(func() { idKey = real })
	return k
}

func (k *keyCalls) n() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.calls)
}

func (k *keyCalls) reset() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls = nil
}

// recv receives from c, failing the test instead of hanging when nothing
// comes (a mutation that lets every try through holds them all).
func recv[T any](t *testing.T, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("nothing received in 10 s")
		panic("unreachable")
	}
}

// holdKeys replaces idKey for one test with one that waits until release
// is called (at the latest when the test ends), then computes.
func holdKeys(t *testing.T, started func()) (release func()) {
	real := idKey
	ch := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	idKey = func(password, salt []byte, time, memory uint32, threads uint8, keyLen uint32) []byte {
		if started != nil {
			started()
		}
		<-ch
		return real(password, salt, time, memory, threads, keyLen)
	}
	t.Cleanup(func() {
		release()
		idKey = real
	})
	return release
}

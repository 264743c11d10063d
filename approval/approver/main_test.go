package approver

import (
	"os"
	"sync"
	"testing"
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

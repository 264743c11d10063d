package ed25519batch_test

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"testing"
	"time"

	"github.com/decisionledger/ledger/internal/ed25519batch"
	"github.com/decisionledger/ledger/internal/proccpu"
)

// benchMessages returns n distinct messages of 600 bytes, about the size
// of a ledger entry's signed message.
func benchMessages(n int) [][]byte {
	msgs := make([][]byte, n)
	for i := range msgs {
		m := bytes.Repeat([]byte("https://example.com/decision "), 600/29+1)[:600]
		copy(m, fmt.Sprintf("%08d", i))
		msgs[i] = m
	}
	return msgs
}

// BenchmarkSign compares crypto/ed25519.Sign with SignBatch at several
// batch sizes, in ns per signature (the ns/op of a batch benchmark is per
// batch), and in CPU ns per signature (cpu-ns/sig, the process's user and
// system time), which other load on the machine disturbs less. The
// parallel- variants sign on every core, as the ledger's signing workers do.
func BenchmarkSign(b *testing.B) {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x42}, 32))
	k, err := ed25519batch.NewPrivateKey(priv)
	if err != nil {
		b.Fatal(err)
	}
	msgs := benchMessages(128)
	b.Run("stdlib", func(b *testing.B) {
		cpu, i := proccpu.Used(), 0
		for b.Loop() {
			ed25519.Sign(priv, msgs[i%len(msgs)])
			i++
		}
		report(b, cpu, 1)
	})
	b.Run("parallel-stdlib", func(b *testing.B) {
		cpu := proccpu.Used()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				ed25519.Sign(priv, msgs[i%len(msgs)])
				i++
			}
		})
		report(b, cpu, 1)
	})
	for _, n := range []int{1, 16, 64, 128} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			cpu := proccpu.Used()
			for b.Loop() {
				k.SignBatch(msgs[:n])
			}
			report(b, cpu, n)
		})
		b.Run(fmt.Sprintf("parallel-batch=%d", n), func(b *testing.B) {
			cpu := proccpu.Used()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					k.SignBatch(msgs[:n])
				}
			})
			report(b, cpu, n)
		})
	}
}

// report adds ns/sig and cpu-ns/sig for b.N operations of perOp
// signatures each, with the CPU time counted from cpu.
func report(b *testing.B, cpu time.Duration, perOp int) {
	sigs := float64(b.N * perOp)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/sigs, "ns/sig")
	b.ReportMetric(float64((proccpu.Used()-cpu).Nanoseconds())/sigs, "cpu-ns/sig")
}

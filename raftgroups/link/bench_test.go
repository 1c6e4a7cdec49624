package link_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/raftgroups/link"
	"github.com/queen-mq/queen/raftgroups/raftgroupstest"
	"github.com/queen-mq/queen/wire"
)

// BenchmarkLinkEntries reads group 1's log of 2,000 KV entries of about
// 450 bytes, or 500 of 16 KiB, through the link, 1 MiB a call, from a
// real one-node source: what a standby's reads cost the source per entry
// and byte served (each op reads the whole log once; the client's
// decoding is in the figure too).
func BenchmarkLinkEntries(b *testing.B) {
	b.Run("450B", func(b *testing.B) { benchLinkEntries(b, 2000, 400) })
	b.Run("16KiB", func(b *testing.B) { benchLinkEntries(b, 500, 16<<10) })
}

func benchLinkEntries(b *testing.B, entries, valueBytes int) {
	var addr string
	_, e := raftgroupstest.StartWith(b, func(c *raftgroups.Config) { c.LinkToken = "bench-link"; addr = c.ListenAddr })
	cl := link.NewClient([]string{addr}, "bench-link", nil)
	defer cl.Close()
	ctx := context.Background()
	pad := strings.Repeat("x", valueBytes)
	for i := 0; i < entries; i++ {
		kc := wire.KVCmd{Ops: []wire.KVOp{{Op: wire.KVPut, NS: "b", Key: []byte(fmt.Sprintf("k%05d", i)), Value: []byte(`"` + pad + `"`)}}}
		if _, err := e.Propose(ctx, 1, wire.Command{Kind: wire.KindKV, Body: kc.Encode(nil)}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	var served int64
	for i := 0; i < b.N; i++ {
		for from := uint64(1); ; {
			bt, err := cl.Entries(ctx, 1, from, 1<<20, 0)
			if err != nil {
				b.Fatal(err)
			}
			for _, en := range bt.Entries {
				served += int64(len(en.Payload))
			}
			from += uint64(len(bt.Entries))
			if from > bt.Commit || len(bt.Entries) == 0 {
				break
			}
		}
	}
	b.SetBytes(served / int64(b.N))
}

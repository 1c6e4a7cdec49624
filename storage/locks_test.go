package storage

import (
	"fmt"
	"testing"

	"github.com/queen-mq/queen/wire"
)

func (h *harness) locks(ops ...wire.LockOp) []wire.LockOpResult {
	h.t.Helper()
	c := wire.LocksCmd{Tenant: wire.DefaultTenant, Ops: ops}
	r, err := wire.DecodeLocksResult(h.apply(wire.KindLocks, c.Encode(nil)))
	if err != nil {
		h.t.Fatal(err)
	}
	return r.Ops
}

func TestLockAcquireHoldRenewRelease(t *testing.T) {
	h := newHarness(t)
	a := h.locks(wire.LockOp{Op: wire.LockAcquire, Name: "job", TTLSec: 30, Owner: "a"})[0]
	if !a.OK || a.Token == 0 {
		t.Fatalf("acquire: %+v", a)
	}
	b := h.locks(wire.LockOp{Op: wire.LockAcquire, Name: "job", TTLSec: 30, Owner: "b"})[0]
	if b.OK || b.Reason != wire.LockReasonHeld || len(b.Holders) != 1 || b.Holders[0].Owner != "a" {
		t.Fatalf("second owner: %+v", b)
	}
	// Renewing keeps the token, so a guard built on it stays valid.
	h.now += 20000
	r := h.locks(wire.LockOp{Op: wire.LockRenew, Name: "job", TTLSec: 30, Token: a.Token})[0]
	if !r.OK || r.Token != a.Token || r.ExpiresMs != h.now+30000 {
		t.Fatalf("renew: %+v", r)
	}
	guard := wire.KVOp{Op: wire.KVCheck, NS: wire.LocksNamespace, Key: []byte("job#0"), HasExpect: true, Expect: a.Token, Required: true}
	if res := h.kv(guard); !res.OK {
		t.Fatalf("guard of the holder fails: %+v", res)
	}
	if r := h.locks(wire.LockOp{Op: wire.LockRelease, Name: "job", Token: a.Token + 1})[0]; r.OK || r.Reason != wire.LockReasonNotHolder {
		t.Fatalf("release with a wrong token: %+v", r)
	}
	if r := h.locks(wire.LockOp{Op: wire.LockRelease, Name: "job", Token: a.Token})[0]; !r.OK {
		t.Fatalf("release: %+v", r)
	}
	// The lock moved: the old holder's guard now fails.
	c := h.locks(wire.LockOp{Op: wire.LockAcquire, Name: "job", TTLSec: 30, Owner: "b"})[0]
	if !c.OK || c.Token <= a.Token {
		t.Fatalf("re-acquire: %+v", c)
	}
	if res := h.kv(guard); res.OK {
		t.Fatal("a stale guard still holds")
	}
	// A lock whose TTL passed is free.
	h.now += 31000
	if d := h.locks(wire.LockOp{Op: wire.LockAcquire, Name: "job", TTLSec: 30, Owner: "c"})[0]; !d.OK {
		t.Fatalf("acquire after expiry: %+v", d)
	}
}

func TestSemaphoreLimitsHolders(t *testing.T) {
	h := newHarness(t)
	granted := map[uint32]string{}
	for i := 0; i < 20; i++ {
		r := h.locks(wire.LockOp{Op: wire.LockAcquire, Name: "pool", TTLSec: 60, Owner: fmt.Sprintf("w%d", i), Limit: 3})[0]
		if r.OK {
			if _, dup := granted[r.Slot]; dup {
				t.Fatalf("slot %d granted twice", r.Slot)
			}
			granted[r.Slot] = fmt.Sprintf("w%d", i)
		} else if r.Reason != wire.LockReasonContended || len(r.Holders) != 3 {
			t.Fatalf("contender %d: %+v", i, r)
		}
	}
	if len(granted) != 3 {
		t.Fatalf("%d holders, want 3", len(granted))
	}
	// An owner that retries its acquire keeps its slot and token.
	first := h.locks(wire.LockOp{Op: wire.LockAcquire, Name: "pool", TTLSec: 60, Owner: granted[0], Limit: 3})[0]
	if !first.OK || first.Slot != 0 {
		t.Fatalf("retried acquire: %+v", first)
	}
}

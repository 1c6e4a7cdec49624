package acl

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Store keeps every tenant's bindings, replicated (raftgroups'
// ACLStore). An Authorizer calls it from its refresher and from Create and
// Delete, never from Allowed.
type Store interface {
	// Generation changes whenever any tenant's bindings change. It is
	// read once a second: it must be cheap (one key read).
	Generation(ctx context.Context) (uint64, error)
	// Load reads every tenant's bindings (by tenant, wire.ID's text form)
	// and the generation they are at, on this node's replica caught up
	// with the latest committed change.
	Load(ctx context.Context) (uint64, map[string][]Binding, error)
	// Change adds and removes some of tenant's bindings in replicated
	// writes, returning once they are committed. Adding a binding present
	// or removing one absent changes nothing.
	Change(ctx context.Context, tenant string, add, remove []Binding) error
}

// Config configures an Authorizer (cmd/queen fills it from QUEEN_ACLS and
// QUEEN_ACL_SUPER_USERS).
type Config struct {
	Enabled bool
	// SuperUsers are principals (User:admin) allowed everything in every
	// tenant they act in.
	SuperUsers []string
	Store      Store
	Logger     *slog.Logger
	// RefreshEvery is how often the refresher looks for changes made
	// through other nodes; DefaultRefreshEvery when zero.
	RefreshEvery time.Duration
}

// DefaultRefreshEvery is how stale a node's view of changes made through
// another node may be.
const DefaultRefreshEvery = time.Second

// Authorizer answers authorization questions from an in-memory index of
// the stored bindings, refreshed at once after a change made through it
// and every RefreshEvery for the others. A nil *Authorizer is disabled.
type Authorizer struct {
	cfg   Config
	super map[string]bool
	ix    atomic.Pointer[index]

	// loadMu serialises loads, changeMu this node's changes (Delete reads
	// then removes).
	loadMu   sync.Mutex
	changeMu sync.Mutex

	started atomic.Bool
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// New builds an Authorizer; Start runs its refresher.
func New(cfg Config) *Authorizer {
	if cfg.RefreshEvery <= 0 {
		cfg.RefreshEvery = DefaultRefreshEvery
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &Authorizer{cfg: cfg, super: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	for _, p := range cfg.SuperUsers {
		if p = strings.TrimSpace(p); p != "" {
			a.super[p] = true
		}
	}
	a.ix.Store(&index{tenants: map[string]*tenantIndex{}})
	return a
}

// ParseSuperUsers splits QUEEN_ACL_SUPER_USERS: principals separated by
// commas or semicolons (Kafka's super.users uses semicolons), each of the
// form Type:name.
func ParseSuperUsers(s string) ([]string, error) {
	var out []string
	for _, p := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' }) {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if i := strings.IndexByte(p, ':'); i <= 0 || i == len(p)-1 {
			return nil, fmt.Errorf("acl: super user %q is not a principal (Type:name, e.g. User:admin)", p)
		}
		out = append(out, p)
	}
	return out, nil
}

// Enabled says whether ACLs are on: off, nothing is checked and the ACL
// APIs answer ErrDisabled.
func (a *Authorizer) Enabled() bool { return a != nil && a.cfg.Enabled }

// SuperUsers is the configured super users.
func (a *Authorizer) SuperUsers() []string {
	if a == nil {
		return nil
	}
	return append([]string(nil), a.cfg.SuperUsers...)
}

// IsSuperUser says whether principal is allowed everything.
func (a *Authorizer) IsSuperUser(principal string) bool {
	return a != nil && a.super[principal]
}

// Allowed answers r: true for a super user; else false when a DENY
// binding matches, true when an ALLOW one does, false when none does
// (Kafka's allow.everyone.if.no.acl.found=false). Always true when ACLs
// are off. It reads the index only: no lock, no I/O, no allocation.
func (a *Authorizer) Allowed(r Request) bool {
	if !a.Enabled() {
		return true
	}
	if a.super[r.Principal] {
		return true
	}
	return a.ix.Load().decide(r)
}

// AllowedAny is Kafka's authorizeByResourceType: whether r's principal may
// do r.Op on some resource of type rt (r.Resource and r.Name are
// ignored). Kafka 3.x lets an idempotent producer in with WRITE on any
// topic. It scans the tenant's bindings of that type: not for hot paths.
func (a *Authorizer) AllowedAny(r Request, rt ResourceType) bool {
	if !a.Enabled() || a.super[r.Principal] {
		return true
	}
	return a.ix.Load().anyAllowed(r, rt)
}

// Describe is tenant's bindings f matches, from this node's index (call
// Refresh first to read what other nodes have just changed).
func (a *Authorizer) Describe(tenant string, f Filter) []Binding {
	if !a.Enabled() {
		return nil
	}
	return a.ix.Load().describe(tenant, f)
}

// Create stores bindings for tenant, each validated first (ErrInvalid
// refuses them all), and answers once they are committed and in this
// node's index.
func (a *Authorizer) Create(ctx context.Context, tenant string, bs []Binding) error {
	if !a.Enabled() {
		return ErrDisabled
	}
	for _, b := range bs {
		if err := Validate(b); err != nil {
			return err
		}
	}
	if len(bs) == 0 {
		return nil
	}
	a.changeMu.Lock()
	defer a.changeMu.Unlock()
	if err := a.Refresh(ctx); err != nil {
		return err
	}
	if a.ix.Load().count(tenant)+len(bs) > MaxBindingsPerTenant {
		return fmt.Errorf("%w: a tenant holds at most %d", ErrLimit, MaxBindingsPerTenant)
	}
	if err := a.cfg.Store.Change(ctx, tenant, bs, nil); err != nil {
		return err
	}
	return a.Refresh(ctx)
}

// Delete removes the tenant's bindings the filters match, answering for
// each filter the bindings it matched, once the removal is committed and
// in this node's index.
func (a *Authorizer) Delete(ctx context.Context, tenant string, fs []Filter) ([][]Binding, error) {
	if !a.Enabled() {
		return nil, ErrDisabled
	}
	for _, f := range fs {
		if err := ValidateFilter(f); err != nil {
			return nil, err
		}
	}
	a.changeMu.Lock()
	defer a.changeMu.Unlock()
	if err := a.Refresh(ctx); err != nil {
		return nil, err
	}
	ix := a.ix.Load()
	out := make([][]Binding, len(fs))
	seen := map[Binding]bool{}
	var remove []Binding
	for i, f := range fs {
		out[i] = ix.describe(tenant, f)
		for _, b := range out[i] {
			if !seen[b] {
				seen[b] = true
				remove = append(remove, b)
			}
		}
	}
	if len(remove) == 0 {
		return out, nil
	}
	if err := a.cfg.Store.Change(ctx, tenant, nil, remove); err != nil {
		return nil, err
	}
	return out, a.Refresh(ctx)
}

// Refresh brings this node's index up to the store's latest generation:
// one key read when nothing changed.
func (a *Authorizer) Refresh(ctx context.Context) error {
	if !a.Enabled() || a.cfg.Store == nil {
		return nil
	}
	a.loadMu.Lock()
	defer a.loadMu.Unlock()
	gen, err := a.cfg.Store.Generation(ctx)
	if err != nil {
		return fmt.Errorf("acl: reading the generation: %w", err)
	}
	if cur := a.ix.Load(); cur.loaded && gen == cur.gen {
		return nil
	}
	gen, all, err := a.cfg.Store.Load(ctx)
	if err != nil {
		return fmt.Errorf("acl: loading bindings: %w", err)
	}
	ix := buildIndex(gen, all)
	ix.loaded = true
	a.ix.Store(ix)
	return nil
}

// Start runs the refresher until Close: a no-op when ACLs are off.
func (a *Authorizer) Start() {
	if !a.Enabled() || a.cfg.Store == nil || !a.started.CompareAndSwap(false, true) {
		return
	}
	go a.refresher()
}

// Close stops the refresher and waits for it.
func (a *Authorizer) Close() {
	if a == nil {
		return
	}
	a.once.Do(func() { close(a.stop) })
	if a.started.Load() {
		<-a.done
	}
}

func (a *Authorizer) refresher() {
	defer close(a.done)
	t := time.NewTicker(a.cfg.RefreshEvery)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-a.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		rctx, rcancel := context.WithTimeout(ctx, 5*a.cfg.RefreshEvery)
		if err := a.Refresh(rctx); err != nil && ctx.Err() == nil {
			a.cfg.Logger.Warn("acl: refreshing the bindings", "err", err)
		}
		rcancel()
		select {
		case <-a.stop:
			return
		case <-t.C:
		}
	}
}

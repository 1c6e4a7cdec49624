package broker

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/json"
	"errors"
	"fmt"
	"hash"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/tenancy"
	"github.com/queen-mq/queen/wire"
)

// SCRAM users managed by DescribeUserScramCredentials (50) and
// AlterUserScramCredentials (51), KIP-554. They are kept in the default
// tenant's KV store (raft-replicated, like group configs: no new entry
// kind), one JSON object per user name in a namespace HTTP clients cannot
// name, holding per mechanism only what the server side of SCRAM needs:
// salt, iterations, StoredKey and ServerKey (RFC 5802), never the salted
// password the client sent. A login looks there first (on a replica
// caught up with the KV group's leader, so a credential added or deleted
// through any node holds on every node), then at QUEEN_KAFKA_SASL_USERS,
// which stays the bootstrap. A managed user logs in as a static one does:
// not limited, acting for the tenant recorded with the credential (the
// default tenant, or in tenancy mode the tenant the user name is).

// scramNS is the KV namespace of managed SCRAM credentials.
const scramNS = "__kafka.scram-credentials"

// Kafka's bounds on a SCRAM credential's iterations (KIP-554).
const (
	minScramIterations = 4096
	maxScramIterations = 16384
)

// scramAttempts bounds one user's compare-and-set rounds.
const scramAttempts = 5

// storedScramUser is one managed user's KV value.
type storedScramUser struct {
	Tenant     wire.ID                         `json:"tenant"`
	Mechanisms map[string]storedScramMechanism `json:"mechanisms"`
}

// storedScramMechanism is one mechanism's server-side credential.
type storedScramMechanism struct {
	Salt       []byte `json:"salt"`
	Iterations int    `json:"iterations"`
	StoredKey  []byte `json:"storedKey"`
	ServerKey  []byte `json:"serverKey"`
}

// scramMechanisms names KIP-554's mechanism numbers.
var scramMechanisms = map[int8]string{1: kafka.MechanismScramSHA256, 2: kafka.MechanismScramSHA512}

func scramMechanismNumber(name string) int8 {
	for n, m := range scramMechanisms {
		if m == name {
			return n
		}
	}
	return 0
}

// Refusals of the SCRAM admin keys, mapped by scramCode.
var (
	errScramNotFound     = errors.New("kafka: no such SCRAM credential")
	errScramDuplicate    = errors.New("kafka: the user is named more than once in the request")
	errScramMechanism    = errors.New("kafka: unsupported SCRAM mechanism")
	errScramUnacceptable = errors.New("kafka: unacceptable SCRAM credential")
	errScramOtherTenant  = errors.New("kafka: in tenancy mode a login manages only the SCRAM user of its own tenant")
)

func scramCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errScramNotFound):
		return kerr.ResourceNotFound.Code
	case errors.Is(err, errScramDuplicate):
		return kerr.DuplicateResource.Code
	case errors.Is(err, errScramMechanism):
		return kerr.UnsupportedSaslMechanism.Code
	case errors.Is(err, errScramUnacceptable):
		return kerr.UnacceptableCredential.Code
	case errors.Is(err, errScramOtherTenant):
		return kerr.ClusterAuthorizationFailed.Code
	}
	return errorCode(err)
}

// scramUserTenant checks that a connection acting for tenant may manage
// user: any user for the default tenant; in tenancy mode only the user
// named by the tenant's UUID, as it logs in.
func scramUserTenant(tenant wire.ID, user string) error {
	if user == "" {
		return fmt.Errorf("%w: empty user name", errScramUnacceptable)
	}
	if tenant == wire.DefaultTenant {
		return nil
	}
	if id, err := tenancy.Parse(user); err != nil || id != tenant {
		return errScramOtherTenant
	}
	return nil
}

// scramUser is a managed user as this node's replica holds it.
func (b *Broker) scramUser(user string) (storedScramUser, uint64, bool, error) {
	it, found, err := b.engine.KVStore(wire.DefaultTenant).KVGet(wire.DefaultTenant, scramNS, []byte(user))
	if err != nil || !found {
		return storedScramUser{}, 0, false, err
	}
	var u storedScramUser
	if err := json.Unmarshal(it.Value, &u); err != nil {
		return storedScramUser{}, 0, false, fmt.Errorf("kafka: SCRAM user %s: %w", user, err)
	}
	return u, it.Version, true, nil
}

// handleDescribeUserScramCredentials (key 50, v0) lists the managed users
// asked for (every one the login may manage when none is named) with
// their mechanisms and iterations. QUEEN_KAFKA_SASL_USERS are
// configuration, not listed.
func (b *Broker) handleDescribeUserScramCredentials(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	tenant := b.tenantOf(c)
	_ = b.catchUpKV(ctx, wire.DefaultTenant) // read-your-writes; else this node's replica answers
	describe := func(user string, u storedScramUser) kmsg.DescribeUserSCRAMCredentialsResponseResult {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = user
		for n := int8(1); n <= 2; n++ {
			if m, ok := u.Mechanisms[scramMechanisms[n]]; ok {
				r.CredentialInfos = append(r.CredentialInfos, kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo{Mechanism: n, Iterations: int32(m.Iterations)})
			}
		}
		return r
	}
	if req.Users == nil {
		err := b.engine.KVStore(wire.DefaultTenant).KVEach(wire.DefaultTenant, scramNS, nil, func(it wire.KVItem) error {
			var u storedScramUser
			if json.Unmarshal(it.Value, &u) == nil && (u.Tenant == tenant || tenant == wire.DefaultTenant) {
				resp.Results = append(resp.Results, describe(string(it.Key), u))
			}
			return nil
		})
		if err != nil {
			resp.Results = nil
			resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		}
		return resp, nil
	}
	seen := map[string]int{}
	for _, ru := range req.Users {
		seen[ru.Name]++
	}
	for _, ru := range req.Users {
		if seen[ru.Name] < 0 {
			continue // answered once already
		}
		var err error
		var u storedScramUser
		var found bool
		switch {
		case seen[ru.Name] > 1:
			err, seen[ru.Name] = errScramDuplicate, -1
		default:
			if err = scramUserTenant(tenant, ru.Name); err == nil {
				u, _, found, err = b.scramUser(ru.Name)
				if err == nil && (!found || len(u.Mechanisms) == 0) {
					err = errScramNotFound
				}
			}
		}
		r := describe(ru.Name, u)
		if err != nil {
			r = kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			r.User, r.ErrorCode, r.ErrorMessage = ru.Name, scramCode(err), errorMessage(err)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

// scramChange is what one request does to one user.
type scramChange struct {
	deletes []int8
	upserts []kmsg.AlterUserSCRAMCredentialsRequestUpsertion
	err     error
}

// handleAlterUserScramCredentials (key 51, v0) adds, replaces and deletes
// managed credentials, each user's changes applied as one compare-and-set
// of its KV value once raft commits it. As in Kafka: a user named twice
// for the same mechanism is DUPLICATE_RESOURCE, an unknown mechanism
// UNSUPPORTED_SASL_MECHANISM, iterations outside 4096..16384 or an empty
// salt or salted password UNACCEPTABLE_CREDENTIAL, deleting what is not
// there RESOURCE_NOT_FOUND.
func (b *Broker) handleAlterUserScramCredentials(ctx context.Context, c *kafka.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	tenant := b.tenantOf(c)
	changes := map[string]*scramChange{}
	var order []string
	change := func(user string) *scramChange {
		ch, ok := changes[user]
		if !ok {
			ch = &scramChange{}
			changes[user] = ch
			order = append(order, user)
		}
		return ch
	}
	mechs := map[string]map[int8]bool{}
	named := func(user string, mech int8) error {
		if mechs[user] == nil {
			mechs[user] = map[int8]bool{}
		}
		if mechs[user][mech] {
			return errScramDuplicate
		}
		mechs[user][mech] = true
		if _, ok := scramMechanisms[mech]; !ok {
			return fmt.Errorf("%w: %d", errScramMechanism, mech)
		}
		return scramUserTenant(tenant, user)
	}
	for _, d := range req.Deletions {
		ch := change(d.Name)
		if err := named(d.Name, d.Mechanism); err != nil && ch.err == nil {
			ch.err = err
		}
		ch.deletes = append(ch.deletes, d.Mechanism)
	}
	for _, u := range req.Upsertions {
		ch := change(u.Name)
		err := named(u.Name, u.Mechanism)
		if err == nil && (u.Iterations < minScramIterations || u.Iterations > maxScramIterations) {
			err = fmt.Errorf("%w: %d iterations, %d to %d accepted", errScramUnacceptable, u.Iterations, minScramIterations, maxScramIterations)
		}
		if err == nil && (len(u.Salt) == 0 || len(u.SaltedPassword) == 0) {
			err = fmt.Errorf("%w: empty salt or salted password", errScramUnacceptable)
		}
		if err != nil && ch.err == nil {
			ch.err = err
		}
		ch.upserts = append(ch.upserts, u)
	}
	if len(order) > 0 {
		// The compare-and-set below would refuse a stale read.
		_ = b.catchUpKV(ctx, wire.DefaultTenant)
	}
	for _, user := range order {
		ch := changes[user]
		err := ch.err
		if err == nil {
			err = b.alterScramUser(ctx, tenant, user, ch)
		}
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User, r.ErrorCode, r.ErrorMessage = user, scramCode(err), errorMessage(err)
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

// alterScramUser applies one user's changes, compare-and-set on the
// version it read, read again after a racing change.
func (b *Broker) alterScramUser(ctx context.Context, tenant wire.ID, user string, ch *scramChange) error {
	cctx, cancel := context.WithTimeout(ctx, adminWait)
	defer cancel()
	for range scramAttempts {
		u, version, found, err := b.scramUser(user)
		if err != nil {
			return err
		}
		if !found {
			u = storedScramUser{Mechanisms: map[string]storedScramMechanism{}}
		}
		if u.Mechanisms == nil {
			u.Mechanisms = map[string]storedScramMechanism{}
		}
		u.Tenant = tenant
		for _, m := range ch.deletes {
			if _, ok := u.Mechanisms[scramMechanisms[m]]; !ok {
				return fmt.Errorf("%w: %s for %s", errScramNotFound, scramMechanisms[m], user)
			}
			delete(u.Mechanisms, scramMechanisms[m])
		}
		for _, up := range ch.upserts {
			name := scramMechanisms[up.Mechanism]
			stored, server := scramKeys(name, up.SaltedPassword)
			u.Mechanisms[name] = storedScramMechanism{Salt: up.Salt, Iterations: int(up.Iterations), StoredKey: stored, ServerKey: server}
		}
		if written, err := b.replaceKV(cctx, wire.DefaultTenant, scramNS, user, version, u, len(u.Mechanisms) == 0); written || err != nil {
			return err
		}
	}
	return fmt.Errorf("%w: SCRAM user %s kept changing", context.DeadlineExceeded, user)
}

// scramKeys derives RFC 5802's StoredKey and ServerKey from a salted
// password (the client computed the PBKDF2 part).
func scramKeys(mechanism string, salted []byte) (storedKey, serverKey []byte) {
	h := sha256.New
	if mechanism == kafka.MechanismScramSHA512 {
		h = sha512.New
	}
	mac := func(msg string) []byte {
		m := hmac.New(h, salted)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	var d hash.Hash = h()
	d.Write(mac("Client Key"))
	return d.Sum(nil), mac("Server Key")
}

// managedScram puts the managed credentials before static, the
// QUEEN_KAFKA_SASL_USERS lookup: a managed user replaces a static one of
// the same name, and deleting it brings the static one back. The replica
// is caught up with the KV group first (within raftgroups.CatchUpWait;
// past it this node's replica answers), so a credential added or deleted
// through another node a moment ago holds here.
func (b *Broker) managedScram(static kafka.ScramCredentials) kafka.ScramCredentials {
	return func(ctx context.Context, mechanism, user string) (kafka.ScramCredential, kafka.Principal, error) {
		_ = b.catchUpKV(ctx, wire.DefaultTenant)
		u, _, found, err := b.scramUser(user)
		if err != nil {
			b.log.Warn("kafka: reading a managed SCRAM credential", "err", err)
		}
		if m, ok := u.Mechanisms[mechanism]; found && ok {
			cred := kafka.ScramCredential{Salt: m.Salt, Iterations: m.Iterations, StoredKey: m.StoredKey, ServerKey: m.ServerKey}
			return cred, kafka.Principal{User: user, Identity: Identity{Tenant: u.Tenant}}, nil
		}
		if static == nil {
			return kafka.ScramCredential{}, kafka.Principal{}, ErrBadCredentials
		}
		return static(ctx, mechanism, user)
	}
}

package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/raftgroups"
	"github.com/queen-mq/queen/storage"
	"github.com/queen-mq/queen/tenancy/acl"
	"github.com/queen-mq/queen/wire"
)

// apiError is an error with the HTTP status and code it is answered with.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(msg string) error { return &apiError{http.StatusBadRequest, "bad_request", msg} }

func notFound(msg string) error { return &apiError{http.StatusNotFound, "not_found", msg} }

func nameTooLong(msg string) error {
	return &apiError{http.StatusRequestEntityTooLarge, "name_too_long", msg}
}

// errorStatus is the one place engine and storage errors become HTTP
// statuses and error codes (spec §2.1).
func errorStatus(err error) (status int, code string, retry bool) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae.status, ae.code, false
	case errors.Is(err, errACLDenied):
		return http.StatusForbidden, "acl_denied", false
	case errors.Is(err, acl.ErrDisabled):
		return http.StatusBadRequest, "security_disabled", false
	case errors.Is(err, acl.ErrInvalid):
		return http.StatusBadRequest, "bad_request", false
	case errors.Is(err, acl.ErrLimit):
		return http.StatusBadRequest, "acl_limit", false
	case errors.Is(err, raftgroups.ErrOverloaded):
		return http.StatusTooManyRequests, "overloaded", true
	case errors.Is(err, raftgroups.ErrOutcomeUnknown):
		return http.StatusServiceUnavailable, "outcome_unknown", true
	case errors.Is(err, raftgroups.ErrNoLeader):
		return http.StatusServiceUnavailable, "no_leader", true
	case errors.Is(err, raftgroups.ErrClosed), errors.Is(err, wire.ErrSealRequired):
		return http.StatusServiceUnavailable, "retry", true
	case errors.Is(err, wire.ErrPartitionMoving):
		// Sealed while it moves to another raft group: writable again
		// there in moments (docs/placement.md, "Moving a partition").
		return http.StatusServiceUnavailable, "partition_moving", true
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable, "timeout", true
	case errors.Is(err, raftgroups.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, "too_large", false
	case errors.Is(err, raftgroups.ErrStorageFull):
		return http.StatusInsufficientStorage, "storage_full", false
	case errors.Is(err, raftgroups.ErrStandby):
		// A standby follows its source and takes writes once promoted.
		return http.StatusServiceUnavailable, "standby", false
	case errors.Is(err, raftgroups.ErrNotStandby):
		return http.StatusConflict, "not_standby", false
	case errors.Is(err, wire.ErrQueueNotFound):
		return http.StatusNotFound, "queue_not_found", false
	case errors.Is(err, wire.ErrPartitionNotFound):
		return http.StatusNotFound, "partition_not_found", false
	case errors.Is(err, wire.ErrLeaseNotFound):
		return http.StatusNotFound, "lease_not_found", false
	case errors.Is(err, wire.ErrMessageNotFound), errors.Is(err, wire.ErrNotFound):
		return http.StatusNotFound, "not_found", false
	case errors.Is(err, wire.ErrBadRequest):
		return http.StatusBadRequest, "bad_request", false
	case errors.Is(err, storage.ErrCorrupt):
		// This node's copy is damaged; another node's may not be.
		return http.StatusInternalServerError, "storage_corrupt", false
	case errors.Is(err, wire.ErrExists), errors.Is(err, wire.ErrConflict):
		return http.StatusConflict, "conflict", false
	}
	return http.StatusInternalServerError, "internal", false
}

// txnReason is the reason a rolled-back transaction is answered with
// (spec §2.8), for a code from the state machine or an error from the
// engine or from validation. Every refused ack, and a required lease that
// is no longer live (the fence of the transaction's acks), is a
// rejected_ack. ok is false for errors that are not a rollback (no
// leader, timeout, ...): those are answered with the error envelope, since
// the transaction may or may not have committed.
func txnReason(err error) (reason string, ok bool) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae.code, true
	case errors.Is(err, raftgroups.ErrTooLarge):
		return "too_large", true
	case errors.Is(err, wire.ErrDuplicate):
		return "duplicate", true
	case errors.Is(err, wire.ErrQueueNotFound):
		return "queue_not_found", true
	case errors.Is(err, wire.ErrPartitionNotFound):
		return "partition_not_found", true
	case errors.Is(err, wire.ErrLeaseMismatch), errors.Is(err, wire.ErrNotLeased), errors.Is(err, wire.ErrNoop),
		errors.Is(err, wire.ErrMessageNotFound), errors.Is(err, wire.ErrLeaseNotFound):
		return "rejected_ack", true
	case errors.Is(err, wire.ErrBadRequest), errors.Is(err, wire.ErrMalformed):
		return "bad_request", true
	case errors.Is(err, wire.ErrConflict):
		return "kv_precondition", true
	}
	return "internal", false
}

// writeError answers err as the spec's error envelope.
func writeError(ctx *fasthttp.RequestCtx, err error) {
	status, code, retry := errorStatus(err)
	if retry {
		ctx.Response.Header.Set("Retry-After", "1")
	}
	writeJSON(ctx, status, errorBody{Error: err.Error(), Code: code})
}

type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
	Path  string `json:"path,omitempty"`
}

// noSuchRoute answers every method+path no route matches.
func noSuchRoute(ctx *fasthttp.RequestCtx) {
	closeIfBodyUnread(ctx)
	writeJSON(ctx, http.StatusNotFound, errorBody{Error: "not found", Code: "no_such_route", Path: string(ctx.Path())})
}

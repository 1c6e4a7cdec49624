package kafka

import (
	"reflect"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrorResponse builds the response to req that reports code wherever the
// response has an error code: at the top level when the response has one,
// and on every element mirrored from the request (topics, partitions,
// groups, resources, members), so the client can match each answer to what
// it asked. This is how Kafka answers a request it refuses as a whole, and
// what handlers use for NOT_COORDINATOR, NOT_CONTROLLER, UNKNOWN_SERVER_ERROR
// and the like. The response has req's version.
//
// Request lists of names (DescribeGroups, DeleteGroups, DeleteTopics,
// DescribeTransactions) and of partition numbers (AddPartitionsToTxn) become
// lists of result elements.
func ErrorResponse(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind()
	mirror(reflect.ValueOf(resp).Elem(), reflect.ValueOf(req).Elem(), code)
	return resp
}

// identityFields are the fields copied from a request element to its
// response element: the ones that say which thing the answer is about.
var identityFields = map[string]bool{
	"Topic": true, "TopicID": true, "Partition": true, "Group": true, "Name": true,
	"ResourceType": true, "ResourceName": true, "MemberID": true, "GroupInstanceID": true, "Key": true,
	"TransactionalID": true,
}

// sliceSources names the request list a response list answers, where the
// two are not named alike.
var sliceSources = map[string][]string{
	"Topics":       {"TopicNames"},      // DeleteTopics before v6
	"Coordinators": {"CoordinatorKeys"}, // FindCoordinator v4+
	"Results":      {"Creations", "Filters"},
	// DescribeTransactions: one state per transactional id asked.
	"TransactionStates": {"TransactionalIDs"},
}

// mirror sets every top-level ErrorCode of resp to code and fills each list
// of structs in resp from the matching list in req (which may be invalid,
// meaning there is nothing to mirror below this level).
func mirror(resp, req reflect.Value, code int16) {
	t := resp.Type()
	for i := range t.NumField() {
		field, f := t.Field(i), resp.Field(i)
		if !field.IsExported() {
			continue
		}
		switch {
		case field.Name == "ErrorCode" && f.Kind() == reflect.Int16:
			f.SetInt(int64(code))
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct:
			src := requestList(req, field.Name)
			if !src.IsValid() || src.Len() == 0 {
				continue
			}
			out := reflect.MakeSlice(f.Type(), src.Len(), src.Len())
			for j := range src.Len() {
				elem := out.Index(j)
				if d, ok := elem.Addr().Interface().(interface{ Default() }); ok {
					d.Default()
				}
				s := src.Index(j)
				if s.Kind() == reflect.Struct {
					copyIdentity(elem, s)
					mirror(elem, s, code)
				} else {
					setIdentity(elem, s)
					mirror(elem, reflect.Value{}, code)
				}
			}
			f.Set(out)
		}
	}
}

// requestList finds the request list that the response list name answers:
// the first non-empty candidate, since a request can carry a list for old
// versions and another for new ones (DeleteTopics TopicNames and Topics).
func requestList(req reflect.Value, name string) reflect.Value {
	if !req.IsValid() || req.Kind() != reflect.Struct {
		return reflect.Value{}
	}
	for _, n := range append([]string{name}, sliceSources[name]...) {
		if f := req.FieldByName(n); f.IsValid() && f.Kind() == reflect.Slice && f.Len() > 0 {
			return f
		}
	}
	return reflect.Value{}
}

// copyIdentity copies the identity fields of a request element into the
// response element, converting between string and *string where the two
// messages differ in nullability.
func copyIdentity(dst, src reflect.Value) {
	t := dst.Type()
	for i := range t.NumField() {
		if name := t.Field(i).Name; identityFields[name] {
			if s := src.FieldByName(name); s.IsValid() {
				assign(dst.Field(i), s)
			}
		}
	}
}

// setIdentity puts a scalar request element (a group name, a partition
// number) into the first identity field of the response element it fits.
func setIdentity(dst, scalar reflect.Value) {
	t := dst.Type()
	for i := range t.NumField() {
		if identityFields[t.Field(i).Name] && assign(dst.Field(i), scalar) {
			return
		}
	}
}

// assign sets dst from src when their types match or differ only by a
// string pointer, and reports whether it did.
func assign(dst, src reflect.Value) bool {
	switch {
	case src.Type() == dst.Type():
		dst.Set(src)
	case src.Kind() == reflect.String && dst.Kind() == reflect.Pointer && dst.Type().Elem().Kind() == reflect.String:
		s := reflect.New(dst.Type().Elem())
		s.Elem().SetString(src.String())
		dst.Set(s)
	case src.Kind() == reflect.Pointer && src.Type().Elem().Kind() == reflect.String && dst.Kind() == reflect.String:
		if !src.IsNil() {
			dst.SetString(src.Elem().String())
		}
	default:
		return false
	}
	return true
}

// Package acl is Queen's one authorization model for both doors (issue 36):
// Kafka's ACLs, as Kafka's AclAuthorizer evaluates them. A binding allows
// or denies a principal, from a host, an operation on a resource (a topic
// = a queue, a consumer group, a transactional id, the cluster) named
// literally, by prefix, or by the wildcard "*". The Kafka door
// (kafka/broker) and the HTTP door (http/) derive the same principal from
// the same credentials with the Principal* functions below, and ask the
// same Authorizer.
//
// The enum values are kmsg's, so the Kafka door converts by a cast.
//
// This package knows no storage: an Authorizer reads and writes its
// bindings through a Store (raftgroups provides the replicated one), and
// keeps every tenant's bindings indexed in memory, so a decision costs a
// few map lookups and no I/O.
package acl

import (
	"errors"
	"fmt"
	"strings"
)

// ResourceType is what a binding is about (kmsg.ACLResourceType).
type ResourceType int8

// Resource types; Any only in filters.
const (
	ResourceAny             ResourceType = 1
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
)

// PatternType is how a binding's name matches resource names
// (kmsg.ACLResourcePatternType).
type PatternType int8

// Pattern types; Any and Match only in filters.
const (
	PatternAny      PatternType = 1
	PatternMatch    PatternType = 2
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

// Operation is what a binding allows or denies (kmsg.ACLOperation).
type Operation int8

// Operations; Any only in filters. All matches every operation.
const (
	OpAny             Operation = 1
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
)

// Permission is a binding's verdict (kmsg.ACLPermissionType); Any only in
// filters.
type Permission int8

// Permissions.
const (
	PermAny   Permission = 1
	PermDeny  Permission = 2
	PermAllow Permission = 3
)

// Wildcards: a Literal binding named WildcardName matches every resource
// of its type, a binding for WildcardPrincipal every principal, one for
// WildcardHost every host.
const (
	WildcardName      = "*"
	WildcardPrincipal = "User:*"
	WildcardHost      = "*"
	// ClusterName is the only name of the cluster resource, as in Kafka.
	ClusterName = "kafka-cluster"
	// Anonymous is the principal of a request made without a login.
	Anonymous = "User:ANONYMOUS"
)

// Bounds on one binding's strings, so a stored binding and the index stay
// bounded whatever a client sends.
const (
	MaxNameBytes      = 512
	MaxPrincipalBytes = 512
	MaxHostBytes      = 256
	// MaxBindingsPerTenant bounds one tenant's bindings.
	MaxBindingsPerTenant = 10000
)

// Binding is one ACL: Principal may (Perm Allow) or may not (Perm Deny) do
// Op, from Host, on the resources of type Resource that Name matches by
// Pattern.
type Binding struct {
	Resource  ResourceType `json:"resource"`
	Name      string       `json:"name"`
	Pattern   PatternType  `json:"pattern"`
	Principal string       `json:"principal"`
	Host      string       `json:"host"`
	Op        Operation    `json:"op"`
	Perm      Permission   `json:"perm"`
}

// Filter selects bindings as Kafka's AclBindingFilter does: Resource,
// Op and Perm Any match every value; Pattern Any matches every pattern
// type (with Name compared exactly), Match matches the bindings that
// would apply to a resource named Name (literal equal, the literal
// wildcard, prefixes of Name); an empty Name, Principal or Host matches
// every one.
type Filter struct {
	Resource  ResourceType `json:"resource"`
	Name      string       `json:"name,omitempty"`
	Pattern   PatternType  `json:"pattern"`
	Principal string       `json:"principal,omitempty"`
	Host      string       `json:"host,omitempty"`
	Op        Operation    `json:"op"`
	Perm      Permission   `json:"perm"`
}

// Request is one authorization question: may Principal, from Host, acting
// in Tenant (wire.ID's text form), do Op on the resource of type Resource
// named Name (ClusterName for the cluster)?
type Request struct {
	Tenant    string
	Principal string
	Host      string
	Resource  ResourceType
	Name      string
	Op        Operation
}

// ErrInvalid is a binding or filter Kafka refuses (INVALID_REQUEST; HTTP
// 400).
var ErrInvalid = errors.New("acl: invalid binding")

// ErrLimit refuses bindings past MaxBindingsPerTenant.
var ErrLimit = errors.New("acl: too many bindings")

// ErrDisabled answers the ACL operations when ACLs are off
// (QUEEN_ACLS=false): Kafka's SECURITY_DISABLED.
var ErrDisabled = errors.New("acl: ACLs are disabled")

// PrincipalUser is the principal of a SASL (PLAIN, SCRAM) user name.
func PrincipalUser(name string) string { return "User:" + name }

// PrincipalForJWT is the principal of a JWT's subject (OAUTHBEARER or a
// JWT as the PLAIN password on the Kafka door, a bearer token on the HTTP
// door): Kafka's default OAUTHBEARER principal, User:<sub>. A token
// without a subject names no one: Anonymous.
func PrincipalForJWT(sub string) string {
	if sub == "" {
		return Anonymous
	}
	return "User:" + sub
}

// PrincipalForAPIKey is the principal of an embedded proxy API key, named
// by its cluster and key id (never by the secret).
func PrincipalForAPIKey(cluster, keyID string) string {
	return "User:apikey:" + cluster + ":" + keyID
}

// Validate checks a binding to store, as Kafka's AclControlManager does:
// a concrete resource type, pattern type, operation and permission; a
// non-empty name (the cluster's is ClusterName); a principal of the form
// Type:name; a non-empty host.
func Validate(b Binding) error {
	switch {
	case b.Resource < ResourceTopic || b.Resource > ResourceTransactionalID:
		return fmt.Errorf("%w: invalid resource type %d", ErrInvalid, b.Resource)
	case b.Pattern != PatternLiteral && b.Pattern != PatternPrefixed:
		return fmt.Errorf("%w: invalid pattern type %d", ErrInvalid, b.Pattern)
	case b.Op < OpAll || b.Op > OpIdempotentWrite:
		return fmt.Errorf("%w: invalid operation %d", ErrInvalid, b.Op)
	case b.Perm != PermAllow && b.Perm != PermDeny:
		return fmt.Errorf("%w: invalid permission type %d", ErrInvalid, b.Perm)
	case b.Name == "":
		return fmt.Errorf("%w: resource name should not be empty", ErrInvalid)
	case b.Resource == ResourceCluster && b.Name != ClusterName:
		return fmt.Errorf("%w: the only valid name for the cluster resource is %s", ErrInvalid, ClusterName)
	case len(b.Name) > MaxNameBytes:
		return fmt.Errorf("%w: resource name longer than %d bytes", ErrInvalid, MaxNameBytes)
	case !strings.Contains(b.Principal, ":") || strings.HasPrefix(b.Principal, ":"):
		return fmt.Errorf("%w: could not parse principal %q (Type:name)", ErrInvalid, b.Principal)
	case len(b.Principal) > MaxPrincipalBytes:
		return fmt.Errorf("%w: principal longer than %d bytes", ErrInvalid, MaxPrincipalBytes)
	case b.Host == "":
		return fmt.Errorf("%w: host should not be empty (use %q for any)", ErrInvalid, WildcardHost)
	case len(b.Host) > MaxHostBytes:
		return fmt.Errorf("%w: host longer than %d bytes", ErrInvalid, MaxHostBytes)
	}
	return nil
}

// Kafka's resource types and operations queen keeps no bindings for
// (delegation tokens, users): a filter may name them and matches nothing.
const (
	maxKafkaResource  ResourceType = 7  // USER
	maxKafkaOperation Operation    = 14 // DESCRIBE_TOKENS
)

// ValidateFilter refuses a filter with a value Kafka does not know
// (Kafka's UNKNOWN, or a number past the enum): INVALID_REQUEST.
func ValidateFilter(f Filter) error {
	switch {
	case f.Resource < ResourceAny || f.Resource > maxKafkaResource:
		return fmt.Errorf("%w: invalid resource type %d", ErrInvalid, f.Resource)
	case f.Pattern < PatternAny || f.Pattern > PatternPrefixed:
		return fmt.Errorf("%w: invalid pattern type %d", ErrInvalid, f.Pattern)
	case f.Op < OpAny || f.Op > maxKafkaOperation:
		return fmt.Errorf("%w: invalid operation %d", ErrInvalid, f.Op)
	case f.Perm < PermAny || f.Perm > PermAllow:
		return fmt.Errorf("%w: invalid permission type %d", ErrInvalid, f.Perm)
	}
	return nil
}

// Matches is Kafka's AclBindingFilter.matches.
func (f Filter) Matches(b Binding) bool {
	if f.Resource != ResourceAny && f.Resource != b.Resource {
		return false
	}
	if f.Pattern != PatternAny && f.Pattern != PatternMatch && f.Pattern != b.Pattern {
		return false
	}
	if f.Name != "" {
		if f.Pattern == PatternMatch {
			switch b.Pattern {
			case PatternLiteral:
				if b.Name != f.Name && b.Name != WildcardName {
					return false
				}
			case PatternPrefixed:
				if !strings.HasPrefix(f.Name, b.Name) {
					return false
				}
			default:
				return false
			}
		} else if f.Name != b.Name {
			return false
		}
	}
	return (f.Principal == "" || f.Principal == b.Principal) &&
		(f.Host == "" || f.Host == b.Host) &&
		(f.Op == OpAny || f.Op == b.Op) &&
		(f.Perm == PermAny || f.Perm == b.Perm)
}

// FilterOf is the filter matching exactly b.
func FilterOf(b Binding) Filter {
	return Filter{Resource: b.Resource, Name: b.Name, Pattern: b.Pattern, Principal: b.Principal, Host: b.Host, Op: b.Op, Perm: b.Perm}
}

var resourceNames = map[ResourceType]string{ResourceAny: "ANY", ResourceTopic: "TOPIC", ResourceGroup: "GROUP", ResourceCluster: "CLUSTER", ResourceTransactionalID: "TRANSACTIONAL_ID"}
var patternNames = map[PatternType]string{PatternAny: "ANY", PatternMatch: "MATCH", PatternLiteral: "LITERAL", PatternPrefixed: "PREFIXED"}
var opNames = map[Operation]string{OpAny: "ANY", OpAll: "ALL", OpRead: "READ", OpWrite: "WRITE", OpCreate: "CREATE", OpDelete: "DELETE", OpAlter: "ALTER", OpDescribe: "DESCRIBE", OpClusterAction: "CLUSTER_ACTION", OpDescribeConfigs: "DESCRIBE_CONFIGS", OpAlterConfigs: "ALTER_CONFIGS", OpIdempotentWrite: "IDEMPOTENT_WRITE"}
var permNames = map[Permission]string{PermAny: "ANY", PermDeny: "DENY", PermAllow: "ALLOW"}

func name[T ~int8](m map[T]string, v T) string {
	if s, ok := m[v]; ok {
		return s
	}
	return fmt.Sprintf("UNKNOWN(%d)", v)
}

// String is Kafka's name (TOPIC, GROUP, ...).
func (r ResourceType) String() string { return name(resourceNames, r) }

// String is Kafka's name (LITERAL, PREFIXED, ...).
func (p PatternType) String() string { return name(patternNames, p) }

// String is Kafka's name (READ, WRITE, ...).
func (o Operation) String() string { return name(opNames, o) }

// String is Kafka's name (ALLOW, DENY).
func (p Permission) String() string { return name(permNames, p) }

func parse[T ~int8](m map[T]string, s string) (T, bool) {
	s = strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(s), "-", "_"))
	for v, n := range m {
		if n == s {
			return v, true
		}
	}
	return 0, false
}

// ParseResourceType reads a Kafka resource type name, any case.
func ParseResourceType(s string) (ResourceType, bool) { return parse(resourceNames, s) }

// ParsePatternType reads a Kafka pattern type name, any case.
func ParsePatternType(s string) (PatternType, bool) { return parse(patternNames, s) }

// ParseOperation reads a Kafka operation name, any case.
func ParseOperation(s string) (Operation, bool) { return parse(opNames, s) }

// ParsePermission reads ALLOW, DENY or ANY, any case.
func ParsePermission(s string) (Permission, bool) { return parse(permNames, s) }

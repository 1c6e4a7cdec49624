// Package kafka is queen's Kafka protocol front door: the TCP (optionally
// TLS) listener, per-connection framing, request header and body decoding,
// dispatch by API key to registered handlers, in-order response writing,
// SASL authentication (the PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER
// exchanges; who may log in is the configured authenticators' say) and the
// version table advertised by ApiVersions.
//
// It owns the wire: size-prefixed frames, request and response headers
// (flexible versions and tagged fields), the limits that keep memory bounded
// (frame size, in-flight requests per connection, buffered request bytes
// across the server, connection count) and the connection lifecycle. Bodies
// are encoded and decoded with franz-go's kmsg; record batches with
// kafka/records.
//
// It never touches the engine, storage, raft or configuration sources: what a
// request means (Produce, Fetch, Metadata, groups, transactions) is decided by
// handlers registered with Server.RegisterHandler, one file per API key named
// by key number (kfake style). The built-in handlers are ApiVersions (18) and,
// when SASL is on, SaslHandshake (17) and SaslAuthenticate (36). Settings
// arrive in Config; nothing here reads the environment.
package kafka

package main

import (
	"crypto/tls"
	"net"
	"strings"
	"time"

	"github.com/queen-mq/queen/crypto/authn"
	"github.com/queen-mq/queen/kafka"
	"github.com/queen-mq/queen/kafka/broker"
	"github.com/queen-mq/queen/kafka/broker/groups"
)

// KafkaConfig is the Kafka facade's part of Config.
type KafkaConfig struct {
	Broker broker.Config
	// SASL lists the mechanisms QUEEN_KAFKA_SASL turns on, as given
	// ("plain,scram-sha-256"); "" for none. SCRAM turns on both hashes.
	SASL       string
	SASLPlain  bool
	SASLScram  bool
	SASLBearer bool
	SASLUsers  map[string]string
	TLSCert    string
	TLSKey     string
	// AllowAnonymous (QUEEN_KAFKA_ALLOW_ANONYMOUS) says an unauthenticated
	// Kafka port is intended while JWT_ENABLED protects HTTP.
	AllowAnonymous bool
}

// kafkaConfig reads spec §3.6's variables. In a cluster every node must say
// where clients reach it; a single node defaults to its listen address.
func (e *env) kafkaConfig(nodeID uint64, cluster bool) KafkaConfig {
	addr := e.str("QUEEN_KAFKA_ADDR", "0.0.0.0:9092")
	if _, _, err := net.SplitHostPort(addr); err != nil {
		e.fail("QUEEN_KAFKA_ADDR", "must be host:port, got %q", addr)
	}
	adv := e.str("QUEEN_KAFKA_ADVERTISED_ADDR", "")
	if adv == "" {
		if cluster {
			e.fail("QUEEN_KAFKA_ADVERTISED_ADDR", "is required in a cluster: the host:port Kafka clients reach this node at")
		}
		adv = loopbackIfUnspecified(addr)
	} else if _, _, err := net.SplitHostPort(adv); err != nil {
		e.fail("QUEEN_KAFKA_ADVERTISED_ADDR", "must be host:port, got %q", adv)
	}
	k := KafkaConfig{
		Broker: broker.Config{
			Listener: kafka.Config{
				Addr:                addr,
				MaxConnections:      e.int("QUEEN_KAFKA_MAX_CONNECTIONS", kafka.DefaultMaxConnections, 1, 1<<20),
				MaxConnectionsPerIP: e.int("QUEEN_KAFKA_MAX_CONNECTIONS_PER_IP", kafka.DefaultMaxConnectionsPerIP, 1, 1<<20),
				MaxUnauthenticatedConnections: e.int("QUEEN_KAFKA_MAX_UNAUTHENTICATED_CONNECTIONS",
					kafka.DefaultMaxUnauthenticatedConnections, 1, 1<<20),
				LoginTimeout: e.millis("QUEEN_KAFKA_LOGIN_TIMEOUT_MS", kafka.DefaultLoginTimeout, 100*time.Millisecond, 10*time.Minute),
			},
			NodeID:            int32(nodeID),
			AdvertisedAddr:    adv,
			DefaultPartitions: int32(e.int("QUEEN_KAFKA_DEFAULT_PARTITIONS", 1, 1, 1<<20)),
			MaxPartitions:     int32(e.int("QUEEN_KAFKA_MAX_PARTITIONS", 1000000, 1, 1<<30)),
			MaxPartitionsPerRequest: e.int("QUEEN_KAFKA_MAX_PARTITIONS_PER_REQUEST",
				broker.DefaultMaxPartitionsPerRequest, 1, 1<<30),
			MaxTenantPartitions:    e.int("QUEEN_KAFKA_MAX_TENANT_PARTITIONS", broker.DefaultMaxTenantPartitions, 1, 1<<30),
			MaxTenantGroups:        e.int("QUEEN_KAFKA_MAX_TENANT_GROUPS", broker.DefaultMaxTenantGroups, 1, 1<<30),
			MaxTenantTxnIDs:        e.int("QUEEN_KAFKA_MAX_TENANT_TRANSACTIONAL_IDS", broker.DefaultMaxTenantTxnIDs, 1, 1<<30),
			MetadataMaxPartitions:  e.int("QUEEN_KAFKA_METADATA_MAX_PARTITIONS", broker.DefaultMetadataMaxPartitions, 1, 1<<30),
			TenantMaxInflightBytes: e.int("QUEEN_KAFKA_TENANT_MAX_INFLIGHT_BYTES", broker.DefaultTenantMaxInflightBytes, 1<<10, 1<<40),
			DedupWindow:            time.Duration(e.int("QUEEN_KAFKA_DEDUP_WINDOW_SECONDS", 900, 1, 1<<30)) * time.Second,
			GroupMinSessionTimeout: e.millis("QUEEN_KAFKA_GROUP_MIN_SESSION_TIMEOUT_MS", 6*time.Second, time.Millisecond, time.Hour),
			GroupMaxSessionTimeout: e.millis("QUEEN_KAFKA_GROUP_MAX_SESSION_TIMEOUT_MS", 300*time.Second, time.Millisecond, time.Hour),
			GroupJoinDelay:         e.millis("QUEEN_KAFKA_GROUP_JOIN_DELAY_MS", 3*time.Second, 0, time.Hour),
			ConsumerGroupSessionTimeout: e.millis("QUEEN_KAFKA_CONSUMER_GROUP_SESSION_TIMEOUT_MS",
				groups.DefaultConsumerSessionTimeout, 100*time.Millisecond, time.Hour),
			ConsumerGroupHeartbeatInterval: e.millis("QUEEN_KAFKA_CONSUMER_GROUP_HEARTBEAT_INTERVAL_MS",
				groups.DefaultConsumerHeartbeatInterval, 10*time.Millisecond, time.Hour),
			MaxMessageBytes:      e.int("QUEEN_KAFKA_MAX_MESSAGE_BYTES", broker.DefaultMaxMessageBytes, 1024, 1<<30),
			MaxDecompressedBytes: e.int("QUEEN_KAFKA_MAX_DECOMPRESSED_BYTES", broker.DefaultMaxDecompressedBytes, 1<<20, 1<<30),
			FetchMaxBytes:        e.int("QUEEN_KAFKA_FETCH_MAX_BYTES", broker.DefaultFetchMaxBytes, 1<<10, 1<<30),
			TxnMaxTimeout:        e.millis("QUEEN_KAFKA_TXN_MAX_TIMEOUT_MS", broker.DefaultTxnMaxTimeout, time.Second, 24*time.Hour),
			MaxTenantTxnTimeout: e.millis("QUEEN_KAFKA_TENANT_TXN_MAX_TIMEOUT_MS", broker.DefaultMaxTenantTxnTimeout,
				time.Second, 24*time.Hour),
			LogCleanerInterval: e.millis("QUEEN_KAFKA_LOG_CLEANER_INTERVAL_MS", broker.DefaultLogCleanerInterval, 10*time.Millisecond, time.Hour),
		},
		TLSCert:        e.str("QUEEN_KAFKA_TLS_CERT", ""),
		TLSKey:         e.str("QUEEN_KAFKA_TLS_KEY", ""),
		AllowAnonymous: e.bool("QUEEN_KAFKA_ALLOW_ANONYMOUS", false),
	}
	var mechanisms []string
	for _, m := range strings.Split(strings.ToLower(e.str("QUEEN_KAFKA_SASL", "")), ",") {
		switch m = strings.TrimSpace(m); m {
		case "", "none", "off":
			continue
		case "plain":
			k.SASLPlain = true
		case "scram-sha-256", "scram-sha-512":
			k.SASLScram = true
		case "oauthbearer":
			k.SASLBearer = true
		default:
			e.fail("QUEEN_KAFKA_SASL", "must be a comma-separated list of plain, scram-sha-256, scram-sha-512 and oauthbearer, or unset; got %q", m)
		}
		mechanisms = append(mechanisms, m)
	}
	k.SASL = strings.Join(mechanisms, ",")
	users := e.lookup("QUEEN_KAFKA_SASL_USERS")
	if k.SASLPlain || k.SASLScram {
		k.SASLUsers = e.users("QUEEN_KAFKA_SASL_USERS", users)
	}
	if k.SASLScram && len(k.SASLUsers) == 0 {
		e.fail("QUEEN_KAFKA_SASL_USERS", "is empty: SCRAM logs in the users it lists (user:password,...)")
	}
	if (k.TLSCert == "") != (k.TLSKey == "") {
		e.fail("QUEEN_KAFKA_TLS_CERT", "and QUEEN_KAFKA_TLS_KEY must be set together")
	} else if k.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(k.TLSCert, k.TLSKey)
		if err != nil {
			e.fail("QUEEN_KAFKA_TLS_CERT", "cannot load the certificate and key: %v", err)
		} else {
			k.Broker.Listener.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		}
	}
	return k
}

// checkKafkaAuth refuses a node whose HTTP API needs a broker JWT while its
// Kafka port, on by default on 0.0.0.0, needs nothing: that port would
// serve every topic and DeleteTopics to anyone, which JWT_ENABLED=true
// does not lead an operator to expect. QUEEN_KAFKA_ALLOW_ANONYMOUS=true
// says it is intended (logConfig then warns at every boot).
func (e *env) checkKafkaAuth(jwtOn bool, k *KafkaConfig) {
	if k.SASLBearer && !jwtOn {
		e.fail("QUEEN_KAFKA_SASL", "oauthbearer needs JWT_ENABLED=true: its tokens are broker JWTs")
	}
	if jwtOn && k.SASL == "" && !k.AllowAnonymous {
		e.fail("QUEEN_KAFKA_SASL", "is unset while JWT_ENABLED=true: the Kafka port (%s) would accept anyone; "+
			"set QUEEN_KAFKA_SASL=plain (the password is then a broker JWT) or oauthbearer, or QUEEN_KAFKA_ALLOW_ANONYMOUS=true "+
			"if an unauthenticated Kafka port is intended", k.Broker.Listener.Addr)
	}
}

// users parses variable name's value v, "user:password,user2:password2".
func (e *env) users(name, v string) map[string]string {
	out := map[string]string{}
	for _, item := range strings.Split(v, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		u, p, ok := strings.Cut(item, ":")
		if !ok || strings.TrimSpace(u) == "" {
			e.fail(name, "must be user:password pairs separated by commas")
			return nil
		}
		out[strings.TrimSpace(u)] = p
	}
	return out
}

// setKafkaAuth installs the SASL mechanisms k turns on. PLAIN (decision
// 9): with broker JWT on the password is a token whose roles limit the
// connection, otherwise the static user table. SCRAM: the static users,
// kept salted and hashed. OAUTHBEARER: broker JWTs.
func setKafkaAuth(k *KafkaConfig, verifier *authn.Verifier, tenancyOn bool) error {
	l := &k.Broker.Listener
	if k.SASLPlain {
		if verifier.Enabled() {
			l.Authenticate = broker.BrokerJWTs(verifier, tenancyOn)
		} else {
			l.Authenticate = broker.StaticUsers(k.SASLUsers, tenancyOn)
		}
	}
	if k.SASLScram {
		lookup, err := broker.ScramUsers(k.SASLUsers, tenancyOn)
		if err != nil {
			return err
		}
		l.Scram = lookup
	}
	if k.SASLBearer {
		l.Bearer = broker.BearerJWTs(verifier, tenancyOn)
	}
	return nil
}

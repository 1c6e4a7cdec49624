/*
 * stats_producer: a librdkafka producer that prints librdkafka's
 * statistics JSON, one object a line, on stdout (Debian's kcat sets no
 * statistics callback, so statistics.interval.ms shows nothing there).
 * Used by e2e/kafka/quota_kcat_test.go to read the broker's "throttle"
 * window. It declares the few librdkafka calls it makes itself, so it
 * builds against the runtime library alone (no librdkafka-dev):
 *
 *   cc -o stats_producer stats_producer.c -l:librdkafka.so.1
 *   stats_producer BROKERS TOPIC CLIENT_ID COUNT SIZE [key=value ...]
 *
 * Exits 0 when every record was delivered, 1 otherwise (each failure
 * printed on stderr).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rd_kafka_s rd_kafka_t;
typedef struct rd_kafka_conf_s rd_kafka_conf_t;
typedef struct rd_kafka_topic_s rd_kafka_topic_t;
typedef int rd_kafka_resp_err_t;
typedef struct {
        rd_kafka_resp_err_t err;
        rd_kafka_topic_t *rkt;
        int32_t partition;
        void *payload;
        size_t len;
        void *key;
        size_t key_len;
        int64_t offset;
        void *_private;
} rd_kafka_message_t;

rd_kafka_conf_t *rd_kafka_conf_new(void);
int rd_kafka_conf_set(rd_kafka_conf_t *, const char *, const char *, char *, size_t);
void rd_kafka_conf_set_stats_cb(rd_kafka_conf_t *, int (*)(rd_kafka_t *, char *, size_t, void *));
void rd_kafka_conf_set_dr_msg_cb(rd_kafka_conf_t *, void (*)(rd_kafka_t *, const rd_kafka_message_t *, void *));
rd_kafka_t *rd_kafka_new(int, rd_kafka_conf_t *, char *, size_t);
rd_kafka_topic_t *rd_kafka_topic_new(rd_kafka_t *, const char *, void *);
int rd_kafka_produce(rd_kafka_topic_t *, int32_t, int, void *, size_t, const void *, size_t, void *);
int rd_kafka_poll(rd_kafka_t *, int);
rd_kafka_resp_err_t rd_kafka_flush(rd_kafka_t *, int);
void rd_kafka_topic_destroy(rd_kafka_topic_t *);
void rd_kafka_destroy(rd_kafka_t *);
rd_kafka_resp_err_t rd_kafka_last_error(void);
const char *rd_kafka_err2str(rd_kafka_resp_err_t);

#define RD_KAFKA_PRODUCER 0
#define RD_KAFKA_MSG_F_COPY 0x2
#define RD_KAFKA_RESP_ERR__QUEUE_FULL -184

static long delivered, failed;

static int stats_cb(rd_kafka_t *rk, char *json, size_t len, void *opaque) {
        (void)rk;
        (void)opaque;
        fwrite(json, 1, len, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        return 0; /* librdkafka frees json */
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
        (void)rk;
        (void)opaque;
        if (m->err) {
                failed++;
                fprintf(stderr, "delivery failed: %s\n", rd_kafka_err2str(m->err));
        } else {
                delivered++;
        }
}

static void set(rd_kafka_conf_t *conf, const char *k, const char *v) {
        char err[512];
        if (rd_kafka_conf_set(conf, k, v, err, sizeof(err)) != 0) {
                fprintf(stderr, "%s=%s: %s\n", k, v, err);
                exit(2);
        }
}

int main(int argc, char **argv) {
        if (argc < 6) {
                fprintf(stderr, "usage: %s BROKERS TOPIC CLIENT_ID COUNT SIZE [key=value ...]\n", argv[0]);
                return 2;
        }
        long count = atol(argv[4]), size = atol(argv[5]);
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        set(conf, "bootstrap.servers", argv[1]);
        set(conf, "client.id", argv[3]);
        for (int i = 6; i < argc; i++) {
                char *eq = strchr(argv[i], '=');
                if (!eq) {
                        fprintf(stderr, "not key=value: %s\n", argv[i]);
                        return 2;
                }
                *eq = '\0';
                set(conf, argv[i], eq + 1);
        }
        rd_kafka_conf_set_stats_cb(conf, stats_cb);
        rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
        char err[512];
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
        if (!rk) {
                fprintf(stderr, "rd_kafka_new: %s\n", err);
                return 2;
        }
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, argv[2], NULL);
        char *value = malloc(size > 0 ? size : 1);
        memset(value, 'v', size);
        for (long i = 0; i < count; i++) {
                char key[32];
                int klen = snprintf(key, sizeof(key), "k%04ld", i);
                while (rd_kafka_produce(rkt, 0, RD_KAFKA_MSG_F_COPY, value, size, key, klen, NULL) == -1) {
                        if (rd_kafka_last_error() != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                                fprintf(stderr, "produce: %s\n", rd_kafka_err2str(rd_kafka_last_error()));
                                return 1;
                        }
                        rd_kafka_poll(rk, 100);
                }
                rd_kafka_poll(rk, 0);
        }
        rd_kafka_flush(rk, 120 * 1000);
        /* One more statistics window after the last answer. */
        for (int i = 0; i < 10; i++)
                rd_kafka_poll(rk, 100);
        rd_kafka_topic_destroy(rkt);
        rd_kafka_destroy(rk);
        free(value);
        fprintf(stderr, "delivered %ld failed %ld of %ld\n", delivered, failed, count);
        return (failed == 0 && delivered == count) ? 0 : 1;
}

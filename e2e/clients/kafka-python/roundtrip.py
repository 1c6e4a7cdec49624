"""kafka-python against a queen node, driven by e2e/kafka_python_test.go,
which checks what this prints. Usage: python3 roundtrip.py <broker> <topic> <group> <n>

The same flow as ../kafkajs/roundtrip.js: create a 3-partition topic,
produce n records (keys, headers, acks=all), consume them all with one
member of a consumer group and commit, produce 10 more, then consume with a
fresh member of the group, which must start at the committed offsets. Each
record consumed is printed as one JSON line.
"""
import json
import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic

broker, topic, group, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
EXTRA = 10
DEADLINE = time.monotonic() + 60


def produce(first, last):
    producer = KafkaProducer(bootstrap_servers=broker, acks="all", client_id="e2e-kafka-python")
    futures = [
        producer.send(topic, key=f"k{i % 5}".encode(), value=str(i).encode(), headers=[("n", str(i).encode())])
        for i in range(first, last)
    ]
    producer.flush()
    for f in futures:
        f.get(timeout=30)  # raises if the broker refused the record
    producer.close()


def consume(member, want):
    consumer = KafkaConsumer(topic, bootstrap_servers=broker, group_id=group, client_id="e2e-kafka-python",
                             auto_offset_reset="earliest", enable_auto_commit=False, fetch_max_wait_ms=200)
    got = 0
    while got < want:
        if time.monotonic() > DEADLINE:
            raise SystemExit(f"member {member} consumed {got} of {want} before the deadline")
        for tp, records in consumer.poll(timeout_ms=500).items():
            for r in records:
                headers = dict(r.headers or [])
                print(json.dumps({"member": member, "partition": tp.partition, "offset": r.offset,
                                  "key": r.key.decode(), "value": r.value.decode(),
                                  "header": headers.get("n", b"").decode()}), flush=True)
                got += 1
    consumer.commit()
    consumer.close()


admin = KafkaAdminClient(bootstrap_servers=broker, client_id="e2e-kafka-python")
admin.create_topics([NewTopic(name=topic, num_partitions=3, replication_factor=1)])
admin.close()

produce(0, n)
consume(1, n)
produce(n, n + EXTRA)
consume(2, EXTRA)

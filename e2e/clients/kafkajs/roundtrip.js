// kafkajs against a queen node, driven by e2e/kafka_kafkajs_test.go, which
// checks what this prints. Usage: node roundtrip.js <broker> <topic> <group> <n>
//
// It creates a 3-partition topic, produces n records (keys, headers,
// acks=-1), consumes them all with one member of a consumer group (offsets
// auto-committed), produces 10 more, then consumes with a fresh member of
// the same group, which must start at the committed offsets. Every record
// consumed is printed as one JSON line: {"member":1|2,"partition","offset",
// "key","value","header"}. Exit status 0 only if every step succeeded.
'use strict';

const { Kafka, Partitioners, logLevel } = require('kafkajs');

const [broker, topic, group, nArg] = process.argv.slice(2);
const n = Number(nArg);
const extra = 10;

const kafka = new Kafka({
  clientId: 'e2e-kafkajs',
  brokers: [broker],
  logLevel: logLevel.WARN,
  retry: { retries: 10 },
});

function messages(from, to) {
  const out = [];
  for (let i = from; i < to; i++) {
    out.push({ key: `k${i % 5}`, value: String(i), headers: { n: String(i) } });
  }
  return out;
}

async function produce(from, to) {
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  await producer.send({ topic, acks: -1, messages: messages(from, to) });
  await producer.disconnect();
}

// consume runs one group member until it has want records, then stops it
// (which commits what it consumed) and leaves the group.
async function consume(member, want) {
  const consumer = kafka.consumer({ groupId: group, maxWaitTimeInMs: 200 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  let got = 0;
  let done;
  const finished = new Promise((resolve) => { done = resolve; });
  await consumer.run({
    eachMessage: async ({ partition, message }) => {
      console.log(JSON.stringify({
        member,
        partition,
        offset: Number(message.offset),
        key: message.key ? message.key.toString() : null,
        value: message.value.toString(),
        header: message.headers && message.headers.n ? message.headers.n.toString() : null,
      }));
      got++;
      if (got === want) done();
    },
  });
  await finished;
  await consumer.stop();
  await consumer.disconnect();
}

async function main() {
  const admin = kafka.admin();
  await admin.connect();
  const created = await admin.createTopics({ topics: [{ topic, numPartitions: 3 }], waitForLeaders: true });
  if (!created) throw new Error('topic was not created');
  const meta = await admin.fetchTopicMetadata({ topics: [topic] });
  if (meta.topics[0].partitions.length !== 3) throw new Error('expected 3 partitions');
  await admin.disconnect();

  await produce(0, n);
  await consume(1, n);
  await produce(n, n + extra);
  await consume(2, extra);
}

main().then(
  () => process.exit(0),
  (err) => { console.error(err); process.exit(1); },
);

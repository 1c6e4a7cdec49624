package http

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/golang-jwt/jwt/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/queen-mq/queen/e2e/e2etest"
	"github.com/queen-mq/queen/e2e/harness"
)

// The dashboard (http/ui) in a real headless Chromium against a real
// node: what it lists matches what was pushed over HTTP and produced over
// Kafka, a group's lag falls on the page as the group consumes, and a
// dead letter is replayed by clicking its button. Each page's screenshot
// goes to docs/ui/ for docs/ui.md.
func TestDashboardInBrowser(t *testing.T) {
	needChromium(t)
	// A Kafka group settles at once instead of waiting for more members.
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: map[string]string{"QUEEN_KAFKA_GROUP_JOIN_DELAY_MS": "0"}})
	n := c.Nodes[0]
	base := n.URL()
	ctx := e2etest.Deadline(t, 90*time.Second)

	// A queue over HTTP: 7 messages on p1, 5 on p2.
	e2etest.PushN(t, ctx, base, "ui-orders", "p1", 7)
	e2etest.PushN(t, ctx, base, "ui-orders", "p2", 5)
	// A topic over Kafka: 3 partitions, 3 keyed records with a header each.
	produceClicks(t, ctx, n.KafkaAddr)
	// A dead letter.
	dead := deadLetter(t, ctx, base, "ui-jobs", "p")

	b := newBrowser(t, 75*time.Second)

	// Queues: both, with their partitions and messages.
	b.run(t, "open queues", chromedp.Navigate(base+"/#/queues"))
	b.waitRow(t, "ui-orders", map[int]string{1: "2", 2: "12", 3: "12"})
	b.waitRow(t, "ui-clicks", map[int]string{1: "3", 2: "9"})
	b.screenshot(t, "queues")
	// Paging: two a page, Next and Previous.
	b.run(t, "two a page", chromedp.Navigate(base+"/#/queues?limit=2"))
	b.waitFor(t, "page 1", `[...document.querySelectorAll("#view tbody tr")].map((r) => r.cells[0].innerText).join() === "ui-clicks,ui-jobs"`, nil)
	b.run(t, "next", chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll("#view .pager button")].find((x) => x.innerText === "Next").click()`))
	b.waitFor(t, "page 2", `[...document.querySelectorAll("#view tbody tr")].map((r) => r.cells[0].innerText).join() === "ui-orders" &&
		document.querySelector("#view .pager").innerText.includes("Page 2")`, nil)
	b.run(t, "previous", chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll("#view .pager button")].find((x) => x.innerText === "Previous").click()`))
	b.waitFor(t, "page 1 again", `[...document.querySelectorAll("#view tbody tr")].map((r) => r.cells[0].innerText).join() === "ui-clicks,ui-jobs"`, nil)

	// The keyboard: the first Tab stops on the skip link, and Enter moves
	// focus to the content, staying on the page.
	b.run(t, "reload", chromedp.Navigate("about:blank"), chromedp.Navigate(base+"/#/queues"))
	b.waitRow(t, "ui-orders", nil)
	b.run(t, "tab", chromedp.KeyEvent("\t"))
	b.waitFor(t, "the skip link focused", `document.activeElement?.className === "skip"`, nil)
	b.run(t, "enter", chromedp.KeyEvent("\r"))
	b.waitFor(t, "the content focused", `document.activeElement?.id === "view" && location.hash === "#/queues"`, nil)

	// Kafka topics: the topic's partitions, each led by node 1.
	b.run(t, "open topics", chromedp.Navigate(base+"/#/topics"))
	b.waitRow(t, "ui-clicks", map[int]string{1: "3", 2: "9"})
	b.screenshot(t, "topics")
	b.run(t, "open topic", chromedp.Click(chromedp.CSS(`a[href="#/topics/ui-clicks"]`)))
	for _, p := range []string{"0", "1", "2"} {
		b.waitRow(t, p, map[int]string{2: "1", 6: "3"})
	}
	b.screenshot(t, "topic")

	// A queue's partitions and the message browser on Kafka partition 1:
	// its records with key and header.
	b.run(t, "open queue", chromedp.Navigate(base+"/#/queues/ui-clicks?partition=1"))
	var rec []string
	b.waitFor(t, "partition 1's records", `(() => {
		const rows = document.querySelectorAll("#browser-out tbody tr");
		if (rows.length !== 3) return null;
		return [...rows[0].cells].map((c) => c.innerText.trim());
	})()`, &rec)
	if rec[0] != "0" || rec[2] != `k-1` || rec[3] != `src=ui-test` || strings.Join(strings.Fields(rec[4]), "") != `{"click":1}` {
		t.Fatalf("first record of partition 1 shows %q", rec)
	}
	// Its trace (none recorded), then the same partition read from the
	// start by time (/api/v1/fetch/offsets).
	b.run(t, "trace", chromedp.Click(chromedp.CSS(`#browser-out button[aria-label="Trace of offset 0"]`)))
	b.waitFor(t, "the trace", `document.getElementById("browser-out").innerText.includes("No trace events for this message.")`, nil)
	b.run(t, "read from the start", chromedp.Evaluate[chromedp.Void](`(() => {
		const f = document.querySelector("form[aria-label='Read messages']");
		f.mode.value = "earliest";
		f.requestSubmit();
	})()`))
	b.waitFor(t, "the records from the start", `document.querySelectorAll("#browser-out tbody tr").length === 3 &&
		!document.getElementById("browser-out").innerText.includes("No trace")`, nil)
	b.run(t, "scroll to the browser", chromedp.ScrollIntoView(chromedp.ID("browser-title")))
	b.screenshot(t, "queue")
	b.everyFieldLabelled(t, "the queue page")

	// A consumer group's lag falls as it consumes.
	e2etest.PopAck(t, ctx, base, "ui-orders", "p1", "ui-workers", 2, "completed")
	b.run(t, "open groups", chromedp.Navigate(base+"/#/groups"))
	b.waitRow(t, "ui-workers", map[int]string{1: "ui-orders", 6: "5"})
	b.run(t, "open group", chromedp.Click(chromedp.CSS(`a[href="#/groups/ui-workers"]`)))
	b.waitFor(t, "lag 5", `document.querySelector(".group-lag")?.dataset.lag === "5"`, nil)
	b.screenshot(t, "group")
	e2etest.PopAck(t, ctx, base, "ui-orders", "p1", "ui-workers", 3, "completed")
	b.waitFor(t, "lag 2 after consuming 3 more", `document.querySelector(".group-lag")?.dataset.lag === "2"`, nil)
	// Seek to a time after every message: nothing left behind.
	b.run(t, "seek", chromedp.Evaluate[chromedp.Void](`(() => {
		const f = document.querySelector("form[aria-label='Seek ui-workers on ui-orders']");
		f.at.value = "2099-01-01T00:00";
		f.requestSubmit();
	})()`))
	b.waitFor(t, "lag 0 after the seek", `document.querySelector(".group-lag")?.dataset.lag === "0"`, nil)

	// A Kafka group's committed offsets are a group like any other.
	commitKafkaOffsets(t, ctx, n.KafkaAddr, "ui-kafka", map[int32]int64{0: 3, 1: 1, 2: 0})
	b.run(t, "open groups again", chromedp.Navigate(base+"/#/groups"))
	b.waitRow(t, "ui-kafka", map[int]string{1: "ui-clicks", 4: "3", 6: "5"})
	b.screenshot(t, "groups")

	// A live Kafka consumer: its group's page lists it as a member.
	consumeClicks(t, n.KafkaAddr, "ui-live")
	b.run(t, "open the live group", chromedp.Navigate(base+"/#/groups/ui-live"))
	b.waitFor(t, "the Kafka member", `document.querySelector("section[aria-label='Kafka members'] tbody tr")?.innerText.includes("ui-test-consumer")`, nil)
	b.screenshot(t, "group-kafka")

	// The dead letter, replayed from the page.
	b.run(t, "open dead letters", chromedp.Navigate(base+"/#/dlq?queue=ui-jobs"))
	b.waitFor(t, "the dead letter's row", `!!document.querySelector("button[data-replay]")`, nil)
	b.screenshot(t, "dlq")
	b.run(t, "replay", chromedp.Click(chromedp.CSS(`button[data-replay]`)))
	b.waitFor(t, "the replay notice", `document.querySelector("#view .notice.ok")?.innerText.startsWith("Replayed")`, nil)
	var dlq struct{ Total int }
	e2etest.GetJSON(t, ctx, http.MethodGet, base+"/api/v1/dlq?queue=ui-jobs", nil, 200, &dlq)
	if dlq.Total != 0 {
		t.Fatalf("after the replay the DLQ still holds %d rows", dlq.Total)
	}
	got := e2etest.PopAck(t, ctx, base, "ui-jobs", "p", "", 10, "completed")
	if len(got) != 1 || string(got[0].Data) != string(dead.Data) {
		t.Fatalf("the replayed message is not back on its queue: %+v", got)
	}

	// Traces: an event recorded under a name, found from the Traces page.
	trace := map[string]any{"transactionId": got[0].TransactionID, "partitionId": got[0].PartitionID,
		"eventType": "processed", "data": map[string]bool{"replayed": true}, "traceNames": []string{"ui-flow"}}
	e2etest.GetJSON(t, ctx, http.MethodPost, base+"/api/v1/traces", trace, http.StatusCreated, nil)
	b.run(t, "open traces", chromedp.Navigate(base+"/#/traces"))
	b.waitRow(t, "ui-flow", nil)
	b.run(t, "open the trace", chromedp.Click(chromedp.CSS(`a[href="#/traces/ui-flow"]`)))
	b.waitFor(t, "the trace's event", fmt.Sprintf(`(() => {
		const r = document.querySelector("#view tbody tr");
		return r && r.cells[1].innerText === "processed" && r.cells[2].innerText === %q &&
			r.cells[6].innerText.includes('"replayed": true');
	})()`, got[0].TransactionID), nil)
	b.screenshot(t, "traces")

	// Overview: the totals, and the live chart once two polls are in.
	b.run(t, "open overview", chromedp.Navigate(base+"/#/overview"))
	b.waitFor(t, "overview totals", `document.getElementById("tile-queues")?.innerText === "3" &&
		document.getElementById("tile-partitions")?.innerText === "6" &&
		document.getElementById("tile-dlq")?.innerText === "0" &&
		document.getElementById("tile-live")?.innerText === "1 / 1" &&
		document.querySelector(".chart polyline")?.getAttribute("points").split(" ").length >= 3`, nil)
	// Traffic while the page polls shows as a rate above zero.
	e2etest.PushN(t, ctx, base, "ui-orders", "p2", 40)
	b.waitFor(t, "a rate in", `document.getElementById("tile-in")?.innerText !== "0.00"`, nil)
	b.screenshot(t, "overview")
	b.run(t, "dark theme", chromedp.Click(chromedp.ID("theme-toggle")))
	b.waitFor(t, "dark theme", `getComputedStyle(document.body).backgroundColor === "rgb(18, 18, 24)"`, nil)
	b.screenshot(t, "overview-dark")
	b.run(t, "light theme", chromedp.Click(chromedp.ID("theme-toggle")))

	// System: this node's groups and the membership (no JWT: open).
	b.run(t, "open system", chromedp.Navigate(base+"/#/system"))
	b.waitFor(t, "membership", `[...document.querySelectorAll("#view caption")].some((c) => c.innerText.startsWith("Leader node 1"))`, nil)
	b.screenshot(t, "system")
	b.everyFieldLabelled(t, "the system page")
	// A membership action goes to the API and its refusal shows as the
	// broker words it.
	b.run(t, "promote a stranger", chromedp.Evaluate[chromedp.Void](`(() => {
		const f = document.querySelector("form[aria-label='Promote learners']");
		f.ids.value = "9";
		f.requestSubmit();
	})()`))
	b.waitFor(t, "the refusal", `document.querySelector("#view .notice.bad")?.innerText.includes("node 9 is not a learner")`, nil)

	// A phone-sized window: the menu folds behind a button.
	b.run(t, "phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)), chromedp.Navigate(base+"/#/queues"))
	b.waitRow(t, "ui-orders", nil)
	b.waitFor(t, "folded menu", `getComputedStyle(document.getElementById("nav")).display === "none"`, nil)
	b.screenshot(t, "queues-phone")
	b.noErrors(t)
}

// produceClicks creates topic ui-clicks with 3 partitions and produces 3
// records to each: key k-i, header src=ui-test, value {"click":i}.
func produceClicks(t *testing.T, ctx context.Context, addr string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 3, -1, nil, "ui-clicks"); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	var recs []*kgo.Record
	for i := range 9 {
		recs = append(recs, &kgo.Record{Topic: "ui-clicks", Partition: int32(i % 3), Key: []byte("k-" + strconv.Itoa(i)),
			Value: []byte(`{"click":` + strconv.Itoa(i) + `}`), Headers: []kgo.RecordHeader{{Key: "src", Value: []byte("ui-test")}}})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// commitKafkaOffsets commits offsets of ui-clicks' partitions for group
// over Kafka (OffsetCommit), as a consumer group would.
func commitKafkaOffsets(t *testing.T, ctx context.Context, addr, group string, offsets map[int32]int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var os kadm.Offsets
	for p, at := range offsets {
		os.Add(kadm.Offset{Topic: "ui-clicks", Partition: p, At: at, LeaderEpoch: -1})
	}
	resp, err := kadm.NewClient(cl).CommitOffsets(ctx, group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("commit offsets: %v", err)
	}
}

// consumeClicks runs a Kafka consumer (client id ui-test-consumer) in
// group on ui-clicks until the test ends.
func consumeClicks(t *testing.T, addr, group string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("ui-test-consumer"), kgo.ConsumerGroup(group),
		kgo.ConsumeTopics("ui-clicks"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	e2etest.PollInBackground(t, cl)
}

// The broker's JWT on: the page asks for a token, keeps it in
// sessionStorage, and what the token's role may not do shows as such.
func TestDashboardAsksForToken(t *testing.T) {
	needChromium(t)
	c := e2etest.StartCluster(t, harness.Options{Nodes: 1, Env: map[string]string{"JWT_ENABLED": "true", "JWT_SECRET": e2etest.JWTSecret,
		"QUEEN_KAFKA_SASL": "plain"}})
	base := c.Nodes[0].URL()
	readOnly := e2etest.HS256Token(t, jwt.MapClaims{"sub": "ui-viewer", "role": "read-only", "exp": time.Now().Add(time.Hour).Unix()})

	b := newBrowser(t, 45*time.Second)
	b.run(t, "open", chromedp.Navigate(base+"/#/overview"))
	b.waitFor(t, "the sign-in dialog", `document.getElementById("token-dialog").open`, nil)
	b.screenshot(t, "signin")
	b.run(t, "a wrong token", chromedp.SendKeys(chromedp.ID("token-input"), "not-a-token"), chromedp.Click(chromedp.ID("token-submit")))
	b.waitFor(t, "the refusal", `document.getElementById("token-error").innerText.includes("refused")`, nil)
	b.run(t, "sign in", chromedp.Evaluate[chromedp.Void](`document.getElementById("token-input").value = ""`), chromedp.SendKeys(chromedp.ID("token-input"), readOnly),
		chromedp.Click(chromedp.ID("token-submit")))
	b.waitFor(t, "the overview", `!document.getElementById("token-dialog").open && document.getElementById("tile-queues")?.innerText === "0" &&
		document.getElementById("tile-live")?.innerText === "admin only"`, nil)
	stored, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`sessionStorage.getItem("queen.token")`))
	if err != nil || stored != readOnly {
		t.Fatalf("sessionStorage holds %q (%v)", stored, err)
	}
	// Membership is the operator's: a read-only token is told so.
	b.run(t, "open system", chromedp.Navigate(base+"/#/system"))
	b.waitFor(t, "the 403 notice", `document.querySelector("#view .notice.bad")?.innerText.includes("operator's token")`, nil)
	b.noErrors(t)
}

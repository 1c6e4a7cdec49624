package kafka

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/queen-mq/queen/kafka/records"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestErrorResponseEveryKey builds an error response for every key of the
// table at both ends of its window and just outside it, and checks that it
// encodes, decodes and carries the code at the top when the response type has
// a top-level error code (older versions may not put it on the wire).
func TestErrorResponseEveryKey(t *testing.T) {
	for key, w := range supportedVersions {
		for _, v := range []int16{w.Min - 1, w.Min, w.Max, w.Max + 1} {
			req := kmsg.RequestForKey(key)
			if v < 0 || v > req.MaxVersion() {
				continue
			}
			req.SetVersion(v)
			resp := ErrorResponse(req, kerr.NotCoordinator.Code)
			if resp.GetVersion() != v || resp.Key() != key {
				t.Fatalf("%s v%d: response is %s v%d", KeyName(key), v, KeyName(resp.Key()), resp.GetVersion())
			}
			frame, err := appendResponseFrame(nil, 1, resp)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := parseResponse(req, frame[4:]); err != nil {
				t.Fatalf("%s v%d: %v", KeyName(key), v, err)
			}
			if f := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode"); f.IsValid() && int16(f.Int()) != kerr.NotCoordinator.Code {
				t.Errorf("%s v%d: top-level error code %d", KeyName(key), v, f.Int())
			}
		}
	}
}

func TestErrorResponseMirrorsRequests(t *testing.T) {
	const code = 35
	str := func(s string) *string { return &s }

	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(6)
	fetch.Topics = []kmsg.FetchRequestTopic{{Topic: "a", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 1, LogStartOffset: 99}, {Partition: 2}}}}
	fr := ErrorResponse(fetch, code).(*kmsg.FetchResponse)
	if len(fr.Topics) != 1 || fr.Topics[0].Topic != "a" || len(fr.Topics[0].Partitions) != 2 {
		t.Fatalf("fetch: %+v", fr)
	}
	for i, p := range fr.Topics[0].Partitions {
		if p.Partition != int32(i+1) || p.ErrorCode != code || p.HighWatermark != -1 && p.HighWatermark != 0 {
			t.Fatalf("fetch partition %d: %+v", i, p)
		}
		if p.LogStartOffset == 99 {
			t.Fatal("a non-identity field was copied from the request")
		}
	}

	groups := kmsg.NewPtrDescribeGroupsRequest()
	groups.SetVersion(3)
	groups.Groups = []string{"g1", "g2"}
	gr := ErrorResponse(groups, code).(*kmsg.DescribeGroupsResponse)
	if len(gr.Groups) != 2 || gr.Groups[1].Group != "g2" || gr.Groups[1].ErrorCode != code {
		t.Fatalf("describe groups: %+v", gr)
	}

	txn := kmsg.NewPtrAddPartitionsToTxnRequest()
	txn.SetVersion(3)
	txn.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "t", Partitions: []int32{4, 5}}}
	tr := ErrorResponse(txn, code).(*kmsg.AddPartitionsToTxnResponse)
	if len(tr.Topics) != 1 || tr.Topics[0].Topic != "t" || len(tr.Topics[0].Partitions) != 2 ||
		tr.Topics[0].Partitions[1].Partition != 5 || tr.Topics[0].Partitions[1].ErrorCode != code {
		t.Fatalf("add partitions to txn: %+v", tr)
	}

	dtx := kmsg.NewPtrDescribeTransactionsRequest()
	dtx.TransactionalIDs = []string{"a", "b"}
	dtr := ErrorResponse(dtx, code).(*kmsg.DescribeTransactionsResponse)
	if len(dtr.TransactionStates) != 2 || dtr.TransactionStates[1].TransactionalID != "b" || dtr.TransactionStates[1].ErrorCode != code {
		t.Fatalf("describe transactions: %+v", dtr)
	}

	del := kmsg.NewPtrDeleteTopicsRequest()
	del.SetVersion(5)
	del.TopicNames = []string{"x"}
	dr := ErrorResponse(del, code).(*kmsg.DeleteTopicsResponse)
	if len(dr.Topics) != 1 || dr.Topics[0].Topic == nil || *dr.Topics[0].Topic != "x" || dr.Topics[0].ErrorCode != code {
		t.Fatalf("delete topics: %+v", dr)
	}

	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(9)
	meta.Topics = []kmsg.MetadataRequestTopic{{Topic: str("m")}}
	mr := ErrorResponse(meta, code).(*kmsg.MetadataResponse)
	if len(mr.Topics) != 1 || *mr.Topics[0].Topic != "m" || mr.Topics[0].ErrorCode != code {
		t.Fatalf("metadata: %+v", mr)
	}

	join := kmsg.NewPtrJoinGroupRequest()
	join.SetVersion(4)
	jr := ErrorResponse(join, code).(*kmsg.JoinGroupResponse)
	if jr.ErrorCode != code {
		t.Fatalf("join group: %+v", jr)
	}
}

func TestRecordsErrorCode(t *testing.T) {
	cases := map[error]int16{
		nil: 0,
		fmt.Errorf("batch 0: %w", records.ErrCorrupt):                kerr.CorruptMessage.Code,
		fmt.Errorf("batch 0: %w", records.ErrTooLarge):               kerr.MessageTooLarge.Code,
		fmt.Errorf("batch 0: %w", records.ErrUnsupportedCompression): kerr.UnsupportedCompressionType.Code,
		fmt.Errorf("batch 0: %w", records.ErrUnsupportedMagic):       kerr.InvalidRecord.Code,
		errors.New("disk on fire"):                                   kerr.UnknownServerError.Code,
	}
	for err, want := range cases {
		if got := RecordsErrorCode(err); got != want {
			t.Errorf("%v: got %d, want %d", err, got, want)
		}
	}
}

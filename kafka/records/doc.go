// Package records is queen's codec for Kafka RecordBatch v2 (magic 2), the
// on-the-wire form of records in Produce requests and Fetch responses.
//
// It owns three things:
//   - decoding the Records bytes of one produce partition (one or more
//     concatenated batches) into Batch values, validating lengths, counts and
//     the CRC-32C, and decompressing gzip, snappy (raw or xerial framed), lz4
//     (frame format) and zstd under a caller-supplied cap on the decompressed
//     size;
//   - encoding data and control batches by appending to a caller buffer, so
//     the fetch path can re-encode stored records without garbage;
//   - the sentinel errors (ErrCorrupt, ErrUnsupportedMagic,
//     ErrUnsupportedCompression, ErrTooLarge, ErrInvalidInput) that the Kafka
//     handlers map to protocol error codes in one place.
//
// It never touches the network, the engine, storage or raft, and it never
// assigns offsets: the caller says which base offset a batch carries. Magic 0
// and 1 message sets (pre-0.11 clients) are refused, not converted.
package records

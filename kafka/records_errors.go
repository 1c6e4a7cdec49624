package kafka

import (
	"errors"

	"github.com/queen-mq/queen/kafka/records"
	"github.com/twmb/franz-go/pkg/kerr"
)

// RecordsErrorCode maps an error from package records to the error code a
// produce partition response carries, so every handler answers the same
// way. It returns UNKNOWN_SERVER_ERROR for errors that are not the codec's.
func RecordsErrorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, records.ErrTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, records.ErrUnsupportedCompression):
		return kerr.UnsupportedCompressionType.Code
	case errors.Is(err, records.ErrUnsupportedMagic):
		// What Kafka answers for a v0/v1 message set in Produce v3+.
		return kerr.InvalidRecord.Code
	case errors.Is(err, records.ErrCorrupt):
		return kerr.CorruptMessage.Code
	}
	return kerr.UnknownServerError.Code
}

package standby

import (
	"testing"

	"github.com/queen-mq/queen/e2e/e2etest"
)

func TestMain(m *testing.M) { e2etest.Main(m) }

package driver

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// The default report keeps the record's bytes exactly and says the record
// was kept, not skipped.
func TestLogCorruptKeepsTheBytes(t *testing.T) {
	var buf bytes.Buffer
	raw := []byte("\xff\xfe{not json")
	LogCorrupt(slog.New(slog.NewTextHandler(&buf, nil)))(context.Background(),
		CorruptRecord{SessionID: "s", Position: "id=7", Raw: raw, Err: errors.New("bad")})
	out := buf.String()
	if !strings.Contains(out, "raw_base64=") || !strings.Contains(out, base64.StdEncoding.EncodeToString(raw)) {
		t.Fatalf("the raw bytes are not in the report: %s", out)
	}
	if strings.Contains(out, "skipped") || !strings.Contains(out, "left in the store") {
		t.Fatalf("the report does not say the record was kept: %s", out)
	}
}

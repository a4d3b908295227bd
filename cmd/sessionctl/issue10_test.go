package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// appendRaw stores raw bytes the adapter would refuse, as a corrupt record.
func appendRaw(t *testing.T, dsn, id string, raw []byte) {
	t.Helper()
	st, err := adapters.Open(context.Background(), dsn)
	require.NoError(t, err)
	defer st.Close()
	require.NoError(t, st.(driver.RawAppender).AppendRaw(context.Background(), id, raw))
}

func sqliteTables(t *testing.T, path string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type='table' ORDER BY name`)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		out = append(out, n)
	}
	return out
}

// 10.3: read-only commands open read-only, create nothing, and fail
// clearly on a missing file or missing tables.
func TestReadOnlyCommandsCreateNothing(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "mistyped.db")
	dsn := "sqlite://" + missing
	to := sqliteURL(t, "to.db")
	for _, args := range [][]string{
		{"doctor", dsn}, {"inspect", dsn, "a"}, {"list", dsn}, {"repair", dsn, "a"},
		{"migrate", "--from", dsn, "--to", to},
	} {
		code, out, stderr := sessionctl(t, args...)
		require.Equal(t, 1, code, "%v: %s%s", args, out, stderr)
		require.Contains(t, stderr, "does not exist", args)
		require.NoFileExists(t, missing, "%v created the file", args)
	}

	app := filepath.Join(dir, "app.db")
	db, err := sql.Open("sqlite", app)
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE orders (id INTEGER PRIMARY KEY)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	before, err := os.ReadFile(app)
	require.NoError(t, err)
	for _, args := range [][]string{{"doctor", "sqlite://" + app}, {"inspect", "sqlite://" + app, "a"}, {"list", "sqlite://" + app}} {
		code, _, stderr := sessionctl(t, args...)
		require.Equal(t, 1, code, args)
		require.Contains(t, stderr, "holds no session tables", args)
	}
	require.Equal(t, []string{"orders"}, sqliteTables(t, app), "no session tables added to the application's database")
	after, err := os.ReadFile(app)
	require.NoError(t, err)
	require.Equal(t, before, after, "the application's database file is byte-identical")
}

// 10.7: an unreadable record's bytes are kept exactly in every report and
// in repair's backup and quarantine: never U+FFFD.
func TestUnreadableRecordsKeepTheirBytes(t *testing.T) {
	dsn := sqliteURL(t, "s.db")
	raw := []byte("\xff\xfe not json \x1b[31m")
	seed(t, dsn, "c", `{"role":"user","content":"hi"}`)
	appendRaw(t, dsn, "c", raw)

	code, out, stderr := sessionctl(t, "inspect", "-json", dsn, "c")
	require.Equal(t, 1, code, "an unreadable record is an error of the diagnosis: %s", stderr)
	var ins inspectReport
	require.NoError(t, json.Unmarshal([]byte(out), &ins))
	require.Len(t, ins.CorruptRecords, 1)
	got, err := base64.StdEncoding.DecodeString(ins.CorruptRecords[0].RawBase64)
	require.NoError(t, err)
	require.Equal(t, raw, got)
	require.NotContains(t, out, "\ufffd")

	code, out, _ = sessionctl(t, "inspect", dsn, "c")
	require.Equal(t, 1, code)
	require.Contains(t, out, `\xff\xfe not json \x1b[31m`, "the text report quotes the bytes exactly")
	require.Contains(t, out, "left in the store")
	require.NotContains(t, out, "\x1b", "no raw escape reaches the terminal")

	backup := filepath.Join(t.TempDir(), "b.jsonl")
	code, out, stderr = sessionctl(t, "repair", "-apply", "-offline", "-backup", backup, dsn, "c")
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, out, "skipped")
	b, err := os.ReadFile(backup)
	require.NoError(t, err)
	require.NotContains(t, string(b), "\ufffd")
	require.Contains(t, string(b), base64.StdEncoding.EncodeToString(raw))
	require.Contains(t, string(b), `"item":{"role":"user","content":"hi"}`, "items byte for byte")

	q := read(t, dsn, "c"+quarantineSuffix)
	require.Len(t, q, 1)
	var rec struct {
		RawBase64 string `json:"raw_base64"`
	}
	require.NoError(t, json.Unmarshal([]byte(q[0]), &rec))
	require.Equal(t, base64.StdEncoding.EncodeToString(raw), rec.RawBase64)
	require.Equal(t, []string{`{"role":"user","content":"hi"}`}, read(t, dsn, "c"))
}

// 10.8: repair shows the change by default, moves what it removes into a
// quarantine session with -apply, and a crash between the quarantine write
// and the replace loses nothing and duplicates nothing.
func TestRepairQuarantinesAndSurvivesACrash(t *testing.T) {
	dsn := sqliteURL(t, "s.db")
	orphan := `{"type":"function_call_output", "call_id":"lost", "output":"x"}` // Python's separators: kept exactly
	seed(t, dsn, "dead",
		`{"role":"user","content":"q"}`, orphan,
		`{"type":"function_call","call_id":"a","name":"f","arguments":"{}"}`,
		`{"type":"function_call_output","call_id":"a","output":"1"}`)

	code, out, _ := sessionctl(t, "repair", dsn, "dead")
	require.Equal(t, 0, code)
	require.Contains(t, out, "move item 1 (orphan-output) to \"dead#quarantine\": "+orphan)
	require.Contains(t, out, "nothing changed (add -apply to apply)")
	require.Len(t, read(t, dsn, "dead"), 4, "the default is a dry run")
	require.Empty(t, read(t, dsn, "dead#quarantine"))

	repairHookAfterQuarantine = func() error { return errors.New("simulated crash") }
	code, _, stderr := sessionctl(t, "repair", "-apply", "-offline", "-backup", "-", dsn, "dead")
	repairHookAfterQuarantine = nil
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "simulated crash")
	require.Len(t, read(t, dsn, "dead"), 4, "the session is whole after the crash")
	q := read(t, dsn, "dead#quarantine")
	require.Len(t, q, 1, "the quarantine holds the copy")
	require.Contains(t, q[0], `"item":`+orphan)

	code, out, stderr = sessionctl(t, "repair", "-apply", "-offline", "-json", "-backup", "-", dsn, "dead")
	require.Equal(t, 0, code, stderr)
	var rep repairReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.True(t, rep.Applied)
	require.True(t, rep.AlreadyQuarantined, "the second run finds the first run's copies")
	require.Equal(t, 4, rep.ItemsBefore)
	require.Equal(t, 3, rep.ItemsAfter)
	require.Equal(t, []removal{{Index: 1, Reason: "orphan-output", Item: orphan}}, rep.Removed)
	require.Len(t, read(t, dsn, "dead#quarantine"), 1, "written once")
	require.Len(t, read(t, dsn, "dead"), 3)

	code, out, _ = sessionctl(t, "doctor", dsn)
	require.Equal(t, 0, code, out)

	seed(t, dsn, "x", `{"role":"user","content":"not a quarantine record"}`)
	seed(t, dsn, "y", `{"type":"function_call_output","call_id":"z","output":"x"}`)
	code, _, stderr = sessionctl(t, "repair", "-apply", "-offline", "-quarantine", "x", dsn, "y")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "holds items repair did not write")
	require.Len(t, read(t, dsn, "y"), 1)
}

// 10.10: a window read with -limit is diagnosed as a window.
func TestInspectLimitKnowsItIsAWindow(t *testing.T) {
	dsn := sqliteURL(t, "s.db")
	seed(t, dsn, "ok",
		`{"role":"user","content":"q"}`,
		`{"type":"function_call","call_id":"a","name":"f","arguments":"{}"}`,
		`{"type":"function_call_output","call_id":"a","output":"1"}`)
	code, out, _ := sessionctl(t, "inspect", "-limit", "1", dsn, "ok")
	require.Equal(t, 0, code)
	require.NotContains(t, out, "orphan-output")
	require.Contains(t, out, problemCallBeforeWindow)
	require.Contains(t, out, "(0 severe)")

	code, out, _ = sessionctl(t, "inspect", "-limit", "1", "-json", dsn, "ok")
	require.Equal(t, 0, code)
	var rep inspectReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.True(t, rep.Window)
	require.False(t, rep.Items[0].InWindow, "ModelInput leaves the output out of this window")
	require.Equal(t, `{"type":"function_call_output","call_id":"a","output":"1"}`, rep.Items[0].Item)
}

// 10.10: stored role, type and call_id values never reach the terminal raw.
func TestStoredEscapesAreSanitized(t *testing.T) {
	dsn := sqliteURL(t, "s.db")
	seed(t, dsn, "evil",
		`{"role":"\u001b]0;pwned\u0007\u001b[2J","content":"x"}`,
		`{"type":"function_call_output\u001b[31m","call_id":"\u009b31m\u202e","output":"x"}`,
		`{"type":"function_call_output","call_id":"\u001b[1mc","output":"x"}`)
	for _, args := range [][]string{{"inspect", dsn, "evil"}, {"doctor", dsn}, {"repair", dsn, "evil"}, {"list", dsn}} {
		_, out, stderr := sessionctl(t, args...)
		for _, bad := range []string{"\x1b", "\x07", "\u009b", "\u202e"} {
			require.NotContains(t, out+stderr, bad, "%v printed a raw %q", args, bad)
		}
	}
	_, out, _ := sessionctl(t, "inspect", dsn, "evil")
	require.Contains(t, out, `message/\x1b]0;pwned\x07\x1b[2J`)
}

// 10.10: doctor reports every session, even after one it cannot read.
func TestDoctorReportsEverySession(t *testing.T) {
	redisURL := testservers.Redis(t)
	prefix := fmt.Sprintf("doctor-all-%d", time.Now().UnixNano())
	dsn := redisURL + "?key_prefix=" + prefix
	seed(t, dsn, "a-first", `{"role":"user","content":"hi"}`)
	seed(t, dsn, "c-last", `{"type":"function_call_output","call_id":"lost","output":"x"}`)
	opt, err := goredis.ParseURL(redisURL)
	require.NoError(t, err)
	rdb := goredis.NewClient(opt)
	defer rdb.Close()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, prefix+":*").Result()
	require.NoError(t, err)
	t.Cleanup(func() {
		keys, _ := rdb.Keys(context.Background(), prefix+":*").Result()
		if len(keys) > 0 {
			rdb.Del(context.Background(), keys...)
		}
	})
	var itemsKey string
	for _, k := range keys {
		if strings.Contains(k, "{a-first}") && strings.HasSuffix(k, "items") {
			itemsKey = k
		}
	}
	require.NotEmpty(t, itemsKey, keys)
	bKey := strings.Replace(itemsKey, "{a-first}", "{b-wrongtype}", 1)
	require.NoError(t, rdb.Set(ctx, bKey, "not a list", 0).Err())

	code, out, _ := sessionctl(t, "doctor", dsn)
	require.Equal(t, 1, code)
	require.Contains(t, out, `error: session "b-wrongtype": cannot read`)
	require.Contains(t, out, `error: session "c-last" item 0: orphan-output`, "the session after the unreadable one is diagnosed")
	require.Contains(t, out, "3 sessions checked, 2 with errors (1 could not be read)")

	code, out, _ = sessionctl(t, "doctor", "-json", dsn)
	require.Equal(t, 1, code)
	var rep doctorReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Equal(t, 3, rep.SessionsChecked)
	require.Equal(t, 1, rep.SessionsUnreadable)
}

// 10.10: progress is one redrawn line on a terminal, and no line per 100
// sessions elsewhere.
func TestProgressIsOneLine(t *testing.T) {
	from, to := sqliteURL(t, "from.db"), sqliteURL(t, "to.db")
	st, err := adapters.Open(context.Background(), from)
	require.NoError(t, err)
	for i := 0; i < 250; i++ {
		s, err := st.Session(fmt.Sprintf("s%03d", i))
		require.NoError(t, err)
		require.NoError(t, s.AddItems(context.Background(), mustItems(t, `{"role":"user","content":"x"}`)))
	}
	require.NoError(t, st.Close())

	code, _, stderr := sessionctl(t, "migrate", "-offline", "--from", from, "--to", to)
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, stderr, "100/250", "no line per 100 sessions when not on a terminal")

	var out, errb bytes.Buffer
	code = run(context.Background(), &env{stdout: &out, stderr: &errb, isTerminal: true}, []string{"doctor", to})
	require.Equal(t, 0, code, errb.String())
	require.Less(t, strings.Count(errb.String(), "\r"), 60, "redraws are paced, not one per session")
	require.NotContains(t, errb.String(), "\n", "a terminal gets one updating line, cleared at the end")
	require.Contains(t, out.String(), "250 sessions checked, 0 with errors")
}

func TestListAndJSON(t *testing.T) {
	dsn := sqliteURL(t, "s.db")
	seed(t, dsn, "a", `{"role":"user","content":"hi"}`, `{"role":"assistant","content":"hello"}`)
	seed(t, dsn, "b", `{"role":"user","content":"x"}`)
	appendRaw(t, dsn, "b", []byte("{broken"))
	code, out, stderr := sessionctl(t, "list", dsn)
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `(?m)^"a" +2 +68 +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ +-$`, out, "with the session's updated_at")
	require.Contains(t, out, "1 unreadable record (run doctor)")
	code, out, _ = sessionctl(t, "list", "-json", dsn)
	require.Equal(t, 0, code)
	var rep listReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	for i := range rep.Sessions {
		_, err := time.Parse(time.RFC3339, rep.Sessions[i].UpdatedAt)
		require.NoError(t, err, "updated_at of %s", rep.Sessions[i].SessionID)
		rep.Sessions[i].UpdatedAt = ""
	}
	require.Equal(t, []listSession{{SessionID: "a", Items: 2, Bytes: 68, Checkpoint: "-"}, {SessionID: "b", Items: 1, Bytes: 29, CorruptRecords: 1, Checkpoint: "-"}}, rep.Sessions)

	for _, args := range [][]string{{"doctor", dsn}, {"migrate", "--from", dsn, "--to", sqliteURL(t, "t.db")}, {"bench", "-n", "3", "-history", "10", "memory://"}, {"repair", dsn, "b"}} {
		_, out, _ := sessionctl(t, append([]string{args[0], "-json"}, args[1:]...)...)
		var v map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &v), "%v: %s", args, out)
	}
}

// The built binary, for the tests that send it signals.
var (
	buildOnce sync.Once
	builtPath string
	buildErr  error
)

func builtBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sessionctl-bin-")
		if err != nil {
			buildErr = err
			return
		}
		builtPath = filepath.Join(dir, "sessionctl")
		out, err := exec.Command("go", "build", "-o", builtPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return builtPath
}

// silentListener accepts connections and never answers.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}

// 10.9: every command stops within 2 s of SIGINT with one summary line,
// against a server that accepts and never answers.
func TestInterruptStopsWithinTwoSeconds(t *testing.T) {
	bin := builtBinary(t)
	addr := silentListener(t)
	for _, args := range [][]string{
		{"doctor", "-connect-timeout", "1m", "redis://" + addr + "/0"},
		{"list", "-connect-timeout", "1m", "mongodb://" + addr + "/db"},
		{"inspect", "-connect-timeout", "1m", "redis://" + addr + "/0", "a"},
		{"migrate", "-connect-timeout", "1m", "--from", "mongodb://" + addr + "/db", "--to", "sqlite://" + filepath.Join(t.TempDir(), "to.db")},
		{"repair", "-connect-timeout", "1m", "redis://" + addr + "/0", "a"},
		{"check", "-timeout", "1m", "mongodb://" + addr + "/db"},
	} {
		t.Run(args[0], func(t *testing.T) {
			cmd := exec.Command(bin, args...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Start())
			time.Sleep(700 * time.Millisecond)
			require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
			sent := time.Now()
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(2 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("%v still running 2 s after SIGINT; stderr: %s", args, stderr.String())
			}
			_ = sent
			require.Equal(t, exitInterrupted, cmd.ProcessState.ExitCode(), stderr.String())
			lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
			require.Len(t, lines, 1, "one summary line: %q", stderr.String())
			require.Contains(t, lines[0], "interrupted")
		})
	}
}

// 10.9: an unreachable store is one line saying so; rediss:// to a plain
// server fails fast with a TLS hint.
func TestConnectionFailuresAreOneLine(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	down := ln.Addr().String()
	ln.Close()
	for _, dsn := range []string{"redis://" + down + "/0", "mongodb://" + down + "/db"} {
		code, _, stderr := sessionctl(t, "doctor", "-connect-timeout", "3s", dsn)
		require.Equal(t, 1, code)
		require.Equal(t, 1, strings.Count(stderr, "\n"), stderr)
		require.Contains(t, stderr, "cannot reach the store at")
		require.NotContains(t, stderr, "decoding key")
	}

	cmd := exec.Command(builtBinary(t), "doctor", "redis://"+down+"/0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.Error(t, cmd.Run())
	require.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line, no driver log: %s", stderr.String())

	plain := silentListener(t)
	code, _, errText := sessionctl(t, "doctor", "-connect-timeout", "1s", "mongodb://"+plain+"/db")
	require.Equal(t, 1, code)
	require.Contains(t, errText, "no answer within 1s", "a deadline is named as such")
	require.NotContains(t, errText, "decoding key")
	require.Equal(t, 1, strings.Count(errText, "\n"), errText)

	start := time.Now()
	code, _, errText = sessionctl(t, "doctor", "rediss://:secret@"+plain+"/0")
	require.Equal(t, 1, code)
	require.Less(t, time.Since(start), 8*time.Second, "a TLS preflight, not the driver's retries")
	require.Contains(t, errText, "no TLS handshake")
	require.Contains(t, errText, "redis://")
	require.NotContains(t, errText, "secret")

	redisURL := testservers.Redis(t)
	code, _, errText = sessionctl(t, "doctor", strings.Replace(redisURL, "redis://", "rediss://", 1))
	require.Equal(t, 1, code)
	require.Contains(t, errText, "TLS")
}

func mustItems(t *testing.T, ss ...string) []session.Item {
	t.Helper()
	its, err := session.ParseItems(ss...)
	require.NoError(t, err)
	return its
}

// The demo, on the built binary: a real child process killed mid-settle,
// and a history with every call before its output, each item once.
func TestDemo(t *testing.T) {
	bin := builtBinary(t)
	out, err := exec.Command(bin, "demo", "-json").Output()
	require.NoError(t, err, string(out))
	var rep demoReport
	require.NoError(t, json.Unmarshal(out, &rep))
	require.True(t, rep.Healthy)
	require.Len(t, rep.Steps, 5)
	require.NoDirExists(t, rep.Dir, "the temporary directory is removed")
	var kinds []string
	for _, h := range rep.History {
		it := session.MustItem(h)
		kinds = append(kinds, it.Type()+"/"+it.Role()+"/"+it.CallID())
	}
	require.Equal(t, []string{"/user/", "function_call//call_1", "function_call_output//call_1", "message/assistant/"}, kinds)
	require.Contains(t, strings.Join(rep.Steps[2].Lines, "\n"), "signal: killed")
	require.Contains(t, strings.Join(rep.Steps[2].Lines, "\n"), "ordinary pending write [function_call:call_1 function_call_output:call_1 assistant]")
	require.Contains(t, strings.Join(rep.Steps[3].Lines, "\n"), "lost acknowledgement is accepted")

	text, err := exec.Command(bin, "demo").Output()
	require.NoError(t, err)
	require.Contains(t, string(text), "SIGKILL right after its append COMMITTED")
	require.Contains(t, string(text), "history.Diagnose finds no problem")
}

// 10.3: a WAL-mode database in a directory the reader cannot write is
// inspected (SQLite cannot create the -shm file there), and nothing is
// created. As root the directory bits do not bind, so the binary runs as
// nobody.
func TestReadOnlyDirectory(t *testing.T) {
	bin := builtBinary(t)
	dir, err := os.MkdirTemp("", "sessionctl-rodir-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.Chmod(dir, 0o755); _ = os.RemoveAll(dir) })
	dsn := "sqlite://" + filepath.Join(dir, "s.db")
	seed(t, dsn, "a", `{"role":"user","content":"hi"}`, `{"type":"function_call_output","call_id":"x","output":"1"}`)
	require.NoError(t, os.Chmod(dir, 0o555))
	before, err := os.ReadDir(dir)
	require.NoError(t, err)

	for _, args := range [][]string{{"list", dsn}, {"inspect", dsn, "a"}, {"doctor", dsn}} {
		cmd := exec.Command(bin, args...)
		if os.Geteuid() == 0 {
			require.NoError(t, os.Chmod(filepath.Dir(bin), 0o755))
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		}
		out, err := cmd.CombinedOutput()
		if args[0] != "list" {
			require.Error(t, err, "the orphan output is an error")
			require.Contains(t, string(out), "orphan-output")
			continue
		}
		require.NoError(t, err, "%v: %s", args, out)
		require.Contains(t, string(out), `"a"`)
	}
	after, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Equal(t, len(before), len(after), "nothing created in the directory")
}

package main

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/internal/testkit/testservers"
)

// 21.4: list notes a session id that also has a session in the other
// Redis layout: two disjoint histories under one id.
func TestListNotesTheOtherRedisLayout(t *testing.T) {
	dsn := regexp.MustCompile(`/\d+$`).ReplaceAllString(testservers.Redis(t), "") + "/13"
	opt, err := goredis.ParseURL(dsn)
	require.NoError(t, err)
	rdb := goredis.NewClient(opt)
	defer rdb.Close()
	n, err := rdb.DBSize(context.Background()).Result()
	require.NoError(t, err)
	require.Zero(t, n, "database 13 of the test server is this test's own")
	t.Cleanup(func() { rdb.FlushDB(context.Background()) })
	python := dsn + "?layout=python"
	seed(t, dsn, "both", `{"role":"user","content":"native"}`)
	seed(t, python, "both", `{"role":"user","content":"python"}`)
	seed(t, dsn, "native-only", `{"role":"user","content":"n"}`)
	seed(t, python, "python-only", `{"role":"user","content":"p"}`)

	code, out, stderr := sessionctl(t, "list", dsn)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, `note: session "both" also exists in the python layout (?layout=python): two disjoint histories`)
	require.NotContains(t, out, `"native-only" also`)
	require.NotContains(t, out, "python-only")

	code, out, stderr = sessionctl(t, "list", python)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, `note: session "both" also exists in the native layout (?layout=native)`)
	require.NotContains(t, out, `"python-only" also`)

	code, out, _ = sessionctl(t, "list", "-json", dsn)
	require.Equal(t, 0, code)
	var rep listReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Len(t, rep.Sessions, 2)
	require.Equal(t, "python", rep.Sessions[0].AlsoInLayout)
	require.Empty(t, rep.Sessions[1].AlsoInLayout)
}

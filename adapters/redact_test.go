package adapters

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// FuzzRedact: for any password p in a URL of the form
// scheme://user:p@rest, where user holds no ':' or '@' and rest no '@'
// (the forms a driver reads), Redact writes exactly
// scheme://user:xxxxx@rest, whatever p holds ('%', '#', '/', '@', ':',
// spaces, "://", invalid UTF-8). So the output holds p only where the
// public parts already hold it, which the property rules out before
// asserting that p (of 4 bytes or more) is gone.
func FuzzRedact(f *testing.F) {
	f.Add("redis", "", "Pa%ssWord", "127.0.0.1:6379/0")
	f.Add("redis", "user", "pass word", "h:1/0")
	f.Add("mongodb", "u", "pa#ss/w?rd@x", "h1:1,h2:2/db?replicaSet=rs0")
	f.Add("unix", "u", "p:a:s:s", "/tmp/redis.sock?db=0")
	f.Add("redis+cluster", "u", "a://b:c@", "h:1")
	f.Add("rediss", "u", "\xff\xfe\x00pw", "h:1/0")
	f.Fuzz(func(t *testing.T, scheme, user, p, rest string) {
		if strings.Index(scheme+"://", "://") != len(scheme) || strings.ContainsAny(user, ":@") ||
			strings.Contains(user, "://") || strings.Contains(rest, "@") {
			t.Skip("not of the form scheme://user:password@rest")
		}
		// A '?' in user or p starts the query early (see
		// TestRedactAtInQuery): a hidden parameter there (a credential,
		// or an option no one knows), or in rest read as the query's end,
		// is masked to its '&', past p's '@' if need be.
		info := user + ":" + p
		if q := strings.IndexByte(info, '?'); q >= 0 && len(hiddenValues(info+"@"+rest, q+1)) > 0 {
			t.Skip("the user info reads as a query holding a hidden value")
		}
		for _, probe := range []string{"x://h" + rest, "x://h?" + rest} {
			if r, _ := redact(probe); r != probe {
				t.Skip("rest holds a credential of its own (FuzzRedactQuery)")
			}
		}
		dsn := scheme + "://" + user + ":" + p + "@" + rest
		out := Redact(dsn)
		want := scheme + "://" + user + ":" + mask + "@" + rest
		if out != want {
			t.Fatalf("Redact(%q) = %q, want %q", dsn, out, want)
		}
		red, secrets := redact(dsn)
		if red != out || len(secrets) == 0 || secrets[0] != p {
			t.Fatalf("redact(%q) = %q, %q; want %q, %q first", dsn, red, secrets, out, p)
		}
		for _, s := range secrets[1:] { // credentials of a query p seems to hold
			if !strings.Contains(p, s) {
				t.Fatalf("redact(%q) found secret %q outside the password %q", dsn, s, p)
			}
		}
		if len(p) >= 4 && !strings.Contains(want, p) && strings.Contains(out, p) {
			t.Fatalf("Redact(%q) = %q shows the password", dsn, out)
		}
		// A backend error that echoes the password loses it too.
		err := scrub(fmt.Errorf("dial %s: refused: %w", dsn, errBackend), p)
		if !errors.Is(err, errBackend) {
			t.Fatalf("scrub lost the error chain: %v", err)
		}
		if public := "dial " + want + ": refused: " + errBackend.Error(); len(p) >= 4 &&
			!strings.Contains(public, p) && strings.Contains(err.Error(), p) {
			t.Fatalf("scrub(%q) = %q shows the password", p, err)
		}
	})
}

var errBackend = errors.New("backend")

// FuzzRedactQuery: the value v of a credential-bearing query parameter,
// among others, never survives Redact or an error scrubbed with what
// redact found, in any of the forms a driver may echo it.
func FuzzRedactQuery(f *testing.F) {
	f.Add("postgres://u@h:5432/db", "password", "s3cr3t!", "sslmode=disable")
	f.Add("mongodb://h/db", "authMechanismProperties", "AWS_SESSION_TOKEN:tok/en+x", "authMechanism=MONGODB-AWS")
	f.Add("redis+sentinel://h:26379/mymaster", "sentinel_password", "p&q=r", "db=0")
	f.Add("rediss://h:6380/0", "my_api_token", "%zz%41", "")
	f.Fuzz(func(t *testing.T, base, name, v, other string) {
		if !strings.Contains(base, "://") || strings.ContainsAny(base, "?#@") || !sensitive(name) ||
			strings.ContainsAny(name, "=&;#?%") || strings.ContainsAny(v, "&;#") || strings.ContainsAny(other, "#@") || len(v) < 4 {
			t.Skip()
		}
		dsn := base + "?" + other + "&" + name + "=" + v + "&db=1"
		public := base + "?" + other + "&" + name + "=" + mask + "&db=1"
		if strings.Contains(public, v) {
			t.Skip("the public parts hold the value")
		}
		out := Redact(dsn)
		if strings.Contains(out, v) {
			t.Fatalf("Redact(%q) = %q shows %q", dsn, out, v)
		}
		_, secrets := redact(dsn)
		err := scrub(fmt.Errorf("open %s: %w", dsn, errBackend), secrets...)
		if strings.Contains(err.Error(), v) || !errors.Is(err, errBackend) {
			t.Fatalf("scrub = %v (secrets %q)", err, secrets)
		}
	})
}

// TestRedactCredentialOptions feeds every documented credential option of
// every scheme (and unknown ones that look like one) through Redact.
func TestRedactCredentialOptions(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u@h/db?password=hunter22&sslmode=disable":                                         "postgres://u@h/db?password=xxxxx&sslmode=disable",
		"postgres://u@h/db?sslpassword=hunter22":                                                      "postgres://u@h/db?sslpassword=xxxxx",
		"host=h user=u password=hunter22 dbname=d":                                                    "host=h user=u password=xxxxx dbname=d",
		"host=h password='hunter 22' dbname=d":                                                        "host=h password=xxxxx dbname=d",
		`host=h password=hunter\ 22 dbname=d`:                                                         "host=h password=xxxxx dbname=d",
		"host=h password='hunter 22":                                                                  "host=h password=xxxxx",
		"mongodb://h/db?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:hunter22": "mongodb://h/db?authMechanism=MONGODB-AWS&authMechanismProperties=xxxxx",
		"mongodb://u:pw@h/db?tlsCertificateKeyFilePassword=hunter22":                                  "mongodb://u:xxxxx@h/db?tlsCertificateKeyFilePassword=xxxxx",
		"redis+sentinel://h:26379/m?sentinel_password=hunter22&db=0":                                  "redis+sentinel://h:26379/m?sentinel_password=xxxxx&db=0",
		"redis://h:6379/0?password=hunter22":                                                          "redis://h:6379/0?password=xxxxx",
		"redis://h:6379/0?x_api_token=hunter22&ttl=1h":                                                "redis://h:6379/0?x_api_token=xxxxx&ttl=1h",
		"redis://h:6379/0?ttl=1h":                                                                     "redis://h:6379/0?ttl=1h",
		"mongodb://h/db?authSource=admin&replicaSet=rs0":                                              "mongodb://h/db?authSource=admin&replicaSet=rs0",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRedactUnparseable(t *testing.T) {
	for in, want := range map[string]string{
		"redis://:Pa%ssWord@127.0.0.1:6379/0": "redis://:xxxxx@127.0.0.1:6379/0",
		"  redis://u:p w@h":                   "  redis://u:xxxxx@h",
		"no scheme at all: p@ss":              "no scheme at all:xxxxx@ss", // read as u:p@h
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRedactAtInQuery: an '@' in the query of a URL with a port reads as
// the end of a password; what follows it is still masked where it names a
// credential, and so is a credential of the query's start, in the
// secrets a backend's message is scrubbed of. Found by FuzzRedactQuery
// (testdata/fuzz/FuzzRedactQuery/22313cfbd50c3c52): the password after the
// '@' was shown.
func TestRedactAtInQuery(t *testing.T) {
	for _, c := range []struct{ in, want, hidden string }{
		{"postgres://db.internal:5432/app?application_name=svc@prod&password=hunter22",
			"postgres://db.internal:xxxxx@prod&password=xxxxx", "hunter22"},
		{"postgres://h:5432/db?password=hunter22&application_name=a@b",
			"postgres://h:xxxxx@b", "hunter22"},
		{"redis://u:pa?ss@h:6379/0?password=hunter22&db=1",
			"redis://u:xxxxx@h:6379/0?password=xxxxx&db=1", "hunter22"},
		{"://:?0&@pAss=0000&db=1", "://:xxxxx@pAss=xxxxx&db=1", "0000"},
		{"://?:&keY=@000&db=1", "://?:xxxxx&db=1", "@000"},
		{"redis://:p?token=abcd@h:6379/0", "redis://:xxxxx", "p?token=abcd"},
		// A '?' in the user name starts the query there: the rest of the
		// user info is a query value, hidden with the password in it.
		{"redis://u?x=1:hunter22@h/0", "redis://u?x=xxxxx", "hunter22"},
		{"0://?=:0@0", "0://?=xxxxx", ":0@0"},
	} {
		red, secrets := redact(c.in)
		if red != c.want || Redact(c.in) != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, red, c.want)
		}
		err := scrub(fmt.Errorf("connect: password %s refused: %w", c.hidden, errBackend), secrets...)
		if strings.Contains(err.Error(), c.hidden) {
			t.Errorf("scrub with the secrets of %q = %q", c.in, err)
		}
	}
}

// TestRedactSQLiteNamesAFile: after "sqlite:" (or "memory:") comes a file
// name, even one that looks like keywords; only a query is hidden.
func TestRedactSQLiteNamesAFile(t *testing.T) {
	for in, want := range map[string]string{
		"sqlite: A=0000 0":                    "sqlite: A=0000 0",
		"sqlite:a b.db?_pragma=key(hunter22)": "sqlite:a b.db?_pragma=xxxxx",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestScrubHidesTheChain(t *testing.T) {
	inner := fmt.Errorf("dial redis://u:hunter22@h: %w", errBackend)
	err := scrub(fmt.Errorf("open: %w", inner), "hunter22")
	require := func(ok bool, msg string) {
		t.Helper()
		if !ok {
			t.Fatal(msg)
		}
	}
	require(errors.Is(err, errBackend), "errors.Is sees the chain")
	require(!strings.Contains(err.Error(), "hunter22"), "message masked")
	for e := errors.Unwrap(err); e != nil; e = errors.Unwrap(e) {
		require(!strings.Contains(e.Error(), "hunter22"), "an unwrapped error shows the password")
	}
	require(scrub(errBackend, "hunter22") == errBackend, "an error without the password is returned as it is")
}

// FuzzRedactWords: in a keyword DSN (pgx's "host=h password=p"), the value
// v of a credential word never survives Redact or an error scrubbed with
// what redact found, as written or as the driver reads it, whether it is
// written bare (a backslash escaping each space, quote and backslash) or
// in single quotes, with or without spaces around the '=', and whatever
// words stand before and after it.
func FuzzRedactWords(f *testing.F) {
	f.Add("host=h user=u", "password", "hunter22", false, "dbname=d")
	f.Add("host=h", "sslpassword", "hunter 22", true, "")
	f.Add("", "password", `it's=secret`, true, "sslmode=disable")
	f.Add("application_name='a b'", "PGPASSWORD", "hunter22", false, "x='y z'")
	f.Add("host=h", "password", `a b\c'd`, false, "")
	f.Fuzz(func(t *testing.T, before, name, v string, quoted bool, after string) {
		if strings.Contains(before, "://") || !sensitive(name) || len(v) < 4 || !wordName.MatchString(name) {
			t.Skip()
		}
		if v == mask {
			t.Skip("a password that is the mask looks masked") // scrub leaves it as it is
		}
		if b := strings.TrimRight(before, " \t\n\r\v\f"); strings.HasSuffix(b, "=") || strings.HasSuffix(before, `\`) {
			t.Skip("the name would be read as part of the word before it") // as pgx and libpq read "a= name=v" and "a=b\ name=v"
		}
		val := "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
		if !quoted {
			val = bareEscapes.ReplaceAllString(v, `\$0`)
		}
		for _, eq := range []string{"=", " = "} {
			dsn := before + " " + name + eq + val + " " + after
			public := before + " " + name + eq + mask + " " + after
			_, secrets := redact(dsn)
			err := scrub(fmt.Errorf("open %s: %w", dsn, errBackend), secrets...)
			for _, form := range []string{v, val} {
				if strings.Contains(public, form) {
					continue // the public parts hold it
				}
				if out := Redact(dsn); strings.Contains(out, form) {
					t.Fatalf("Redact(%q) = %q shows %q", dsn, out, form)
				}
				if strings.Contains(err.Error(), form) {
					t.Fatalf("scrub = %v (secrets %q)", err, secrets)
				}
			}
		}
	})
}

var (
	wordName    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*$`)
	bareEscapes = regexp.MustCompile(`[\s'\\]`) // what a bare keyword value escapes
)

// TestRedactWordsLong: a keyword DSN too long to read word by word is
// masked whole, in time.
func TestRedactWordsLong(t *testing.T) {
	long := strings.Repeat("a=' ", maxWordsDSN/4) + "password=hunter22"
	if red, secrets := redact(long); red != mask || len(secrets) != 1 || secrets[0] != long {
		t.Fatalf("redact of a %d-byte keyword DSN = %.40q, %d secrets", len(long), red, len(secrets))
	}
	edge := strings.Repeat("a=' ", (maxWordsDSN-20)/4) + " password=hunter22"
	if red := Redact(edge); strings.Contains(red, "hunter22") || len(edge) > maxWordsDSN {
		t.Fatalf("Redact of a %d-byte keyword DSN shows the password", len(edge))
	}
}

// FuzzRedactUnknownOption: the value v of an option no backend or driver
// knows (a mistyped "passwrd", a SQLite "_pragma"), among others, in every
// form Redact reads (scheme://, sqlite:opaque, no scheme, keyword DSN),
// never survives Redact or an error scrubbed with what redact found
// (issue 36 item 3).
func FuzzRedactUnknownOption(f *testing.F) {
	f.Add(uint8(0), "postgres://u@h:5432/db", "passwrd", "s3cr3t!!", "sslmode=disable")
	f.Add(uint8(1), "sqlite:rel.db", "_pragma", "key(hunter22)", "busy_timeout=1s")
	f.Add(uint8(2), "u@h:5432/db", "foo", "hunter22", "")
	f.Add(uint8(3), "host=h user=u", "foo", "hunter22", "dbname=d")
	f.Add(uint8(0), "mongodb://h/db", "replicaSett", "rs0-secret", "authSource=admin")
	f.Fuzz(func(t *testing.T, form uint8, base, name, v, other string) {
		if h, unknown := hidden(name); !h || !unknown || len(v) < 4 || name == "" ||
			strings.ContainsAny(name, "=&;#?% \t\n\r\v\f'\\") || strings.ContainsAny(v, "&;#\\ \t\n\r\v\f'") ||
			strings.ContainsAny(other, "#@?") || strings.ContainsAny(base, "?#@=") {
			t.Skip()
		}
		var dsn, public string
		switch form % 4 {
		case 0: // scheme://…
			if !strings.Contains(base, "://") {
				t.Skip()
			}
			dsn, public = base+"?"+other+"&"+name+"="+v+"&db=1", base+"?"+other+"&"+name+"="+mask+"&db=1"
		case 1: // sqlite:opaque
			dsn, public = "sqlite:"+base+"?"+other+"&"+name+"="+v, "sqlite:"+base+"?"+other+"&"+name+"="+mask
		case 2: // no scheme
			if strings.Contains(base, ":") {
				t.Skip()
			}
			dsn, public = base+"?"+other+"&"+name+"="+v, base+"?"+other+"&"+name+"="+mask
		case 3: // keyword DSN
			if strings.Contains(base, "://") || strings.ContainsAny(other, "'\\=") || !wordName.MatchString(name) {
				t.Skip()
			}
			if l := strings.ToLower(base); strings.HasPrefix(l, "sqlite:") || strings.HasPrefix(l, "memory:") {
				t.Skip("an SQLite or memory URL: what follows the scheme is a file name, not keywords")
			}
			dsn, public = base+" "+name+"="+v+" "+other, base+" "+name+"="+mask+" "+other
		}
		if strings.Contains(public, v) {
			t.Skip("the public parts hold the value")
		}
		if out := Redact(dsn); strings.Contains(out, v) {
			t.Fatalf("Redact(%q) = %q shows %q", dsn, out, v)
		}
		_, secrets := redact(dsn)
		err := scrub(fmt.Errorf("open %s: %w", dsn, errBackend), secrets...)
		if strings.Contains(err.Error(), v) || !errors.Is(err, errBackend) {
			t.Fatalf("scrub = %v (secrets %q)", err, secrets)
		}
	})
}

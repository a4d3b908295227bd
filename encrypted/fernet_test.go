package encrypted

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"
)

// The Fernet spec's own vector (fernet/spec generate.json and verify.json,
// version 128).
const (
	specToken  = "gAAAAAAdwJ6wAAECAwQFBgcICQoLDA0ODy021cpGVWKZ_eEwCGM4BLLF_5CV9dOPmrhuVUPgJobwOz7JcbmrR64jVmpU4IwqDA=="
	specSecret = "cw_0x689RpI-jtRR7oE8h_eQsKImvJapLeSbXpwF4e4="
	specSrc    = "hello"
)

var specNow = time.Date(1985, 10, 26, 1, 20, 0, 0, time.FixedZone("", -7*3600))

func specKey(t *testing.T) []byte {
	t.Helper()
	k, err := base64.URLEncoding.DecodeString(specSecret)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestFernetSpecGenerate(t *testing.T) {
	iv := []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	got, err := fernetEncrypt(specKey(t), []byte(specSrc), specNow, iv)
	if err != nil {
		t.Fatal(err)
	}
	if got != specToken {
		t.Fatalf("token\n got %s\nwant %s", got, specToken)
	}
}

func TestFernetSpecVerify(t *testing.T) {
	got, err := fernetDecrypt(specKey(t), specToken, 60*time.Second, specNow.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != specSrc {
		t.Fatalf("got %q", got)
	}
}

// signed returns a token over an arbitrary body (block aligned), correctly
// signed, so the checks after the signature can be reached.
func signed(key []byte, stamp time.Time, body []byte) string {
	msg := make([]byte, fernetHeader, fernetHeader+len(body)+fernetMACSize)
	msg[0] = fernetVersion
	binary.BigEndian.PutUint64(msg[1:9], uint64(stamp.Unix()))
	iv := msg[9:fernetHeader]
	block, _ := aes.NewCipher(key[16:])
	ct := make([]byte, len(body))
	cipher.NewCBCEncrypter(block, iv).CryptBlocks(ct, body)
	msg = append(msg, ct...)
	mac := hmac.New(sha256.New, key[:16])
	mac.Write(msg)
	return base64.URLEncoding.EncodeToString(mac.Sum(msg))
}

// TestFernetRefusals covers the spec's invalid cases, each made here from
// the spec key so that exactly one defect is present.
func TestFernetRefusals(t *testing.T) {
	key := specKey(t)
	raw, _ := base64.URLEncoding.DecodeString(specToken)
	flip := func(i int) string {
		b := append([]byte(nil), raw...)
		b[i] ^= 1
		return base64.URLEncoding.EncodeToString(b)
	}
	badPad := make([]byte, 16)
	badPad[15] = 3 // claims 3 bytes of padding, holds zeros
	cases := []struct {
		name  string
		token string
		ttl   time.Duration
		now   time.Time
		want  error
	}{
		{"incorrect mac", flip(len(raw) - 1), time.Minute, specNow.Add(time.Second), errTokenMAC},
		{"tampered ciphertext", flip(30), 0, specNow, errTokenMAC},
		{"tampered timestamp", flip(8), 0, specNow, errTokenMAC},
		{"too short", base64.URLEncoding.EncodeToString(raw[:fernetHeader+8]), 0, specNow, errTokenFormat},
		{"invalid base64", "%%%%" + specToken[4:], 0, specNow, errTokenFormat},
		{"wrong version", flip(0), 0, specNow, errTokenFormat},
		{"payload size not multiple of block size", func() string {
			b := append([]byte(nil), raw[:len(raw)-fernetMACSize]...)
			b = append(b, 1, 2, 3)
			mac := hmac.New(sha256.New, key[:16])
			mac.Write(b)
			return base64.URLEncoding.EncodeToString(mac.Sum(b))
		}(), 0, specNow, errTokenFormat},
		{"payload padding error", signed(key, specNow, badPad), 0, specNow, errTokenPad},
		{"far-future timestamp", signed(key, specNow.Add(time.Hour), append(make([]byte, 15), 1)), time.Minute, specNow, errTokenFuture},
		{"expired ttl", specToken, time.Minute, specNow.Add(61 * time.Second), ErrExpired},
		{"empty", "", 0, specNow, errTokenFormat},
	}
	for _, c := range cases {
		_, err := fernetDecrypt(key, c.token, c.ttl, c.now)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	// Without a ttl, as Python without one, neither age nor future stamps
	// are checked.
	if _, err := fernetDecrypt(key, signed(key, specNow.Add(time.Hour), append(make([]byte, 15), 1)), 0, specNow); err != nil {
		t.Errorf("future stamp without ttl: %v", err)
	}
	if _, err := fernetDecrypt(key, specToken, 0, specNow.Add(100*365*24*time.Hour)); err != nil {
		t.Errorf("old token without ttl: %v", err)
	}
}

func FuzzFernetDecrypt(f *testing.F) {
	f.Add(specToken)
	f.Add(strings.Repeat("A", 100))
	f.Add("gAAAAA")
	key, _ := base64.URLEncoding.DecodeString(specSecret)
	f.Fuzz(func(t *testing.T, token string) {
		plain, err := fernetDecrypt(key, token, 0, specNow)
		if err != nil {
			return
		}
		// Whatever decrypts must re-encrypt to a token that decrypts the same.
		again, err := fernetEncrypt(key, plain, specNow, nil)
		if err != nil {
			t.Fatal(err)
		}
		back, err := fernetDecrypt(key, again, 0, specNow)
		if err != nil || string(back) != string(plain) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func FuzzMasterKey(f *testing.F) {
	f.Add(specSecret)
	f.Add("=cw_0x689RpI")
	f.Add("a plain passphrase")
	f.Fuzz(func(t *testing.T, s string) {
		b, ok := pyURLSafeB64Decode(s)
		if !ok {
			return
		}
		// Python's decoder never yields more than 3 bytes per 4 alphabet
		// characters.
		n := 0
		for i := 0; i < len(s); i++ {
			if _, ok := b64Value(s[i]); ok {
				n++
			}
		}
		if len(b) > n*3/4 {
			t.Fatalf("%q decoded to %d bytes from %d characters", s, len(b), n)
		}
	})
}

package encrypted

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"time"
)

// The Fernet spec: a token is base64url(0x80 | timestamp (8 bytes, big
// endian) | IV (16) | AES-128-CBC ciphertext | HMAC-SHA256 (32)); the key's
// first 16 bytes sign, its last 16 encrypt.
const (
	fernetVersion  = 0x80
	fernetHeader   = 1 + 8 + 16
	fernetMACSize  = sha256.Size
	fernetMaxSkew  = 60 * time.Second
	fernetKeyBytes = 32
)

var (
	errTokenFormat = errors.New("not a Fernet token")
	errTokenMAC    = errors.New("token signature does not match (wrong key or tampered token)")
	errTokenFuture = errors.New("token timestamp is more than 60 s in the future")
	errTokenPad    = errors.New("token padding is invalid (wrong key or tampered token)")
)

// fernetEncrypt returns the token of plaintext under key, stamped now, with
// iv (random when nil).
func fernetEncrypt(key, plaintext []byte, now time.Time, iv []byte) (string, error) {
	if iv == nil {
		iv = make([]byte, aes.BlockSize)
		if _, err := rand.Read(iv); err != nil {
			return "", err
		}
	}
	block, err := aes.NewCipher(key[16:])
	if err != nil {
		return "", err
	}
	pad := aes.BlockSize - len(plaintext)%aes.BlockSize
	msg := make([]byte, fernetHeader, fernetHeader+len(plaintext)+pad+fernetMACSize)
	msg[0] = fernetVersion
	binary.BigEndian.PutUint64(msg[1:9], uint64(now.Unix()))
	copy(msg[9:fernetHeader], iv)
	body := msg[fernetHeader : fernetHeader+len(plaintext)+pad]
	copy(body, plaintext)
	for i := len(plaintext); i < len(body); i++ {
		body[i] = byte(pad)
	}
	cipher.NewCBCEncrypter(block, iv).CryptBlocks(body, body)
	msg = msg[:fernetHeader+len(body)]
	mac := hmac.New(sha256.New, key[:16])
	mac.Write(msg)
	msg = mac.Sum(msg)
	return base64.URLEncoding.EncodeToString(msg), nil
}

// fernetDecrypt returns the plaintext of token under key. ttl > 0 refuses a
// token older than ttl with an error wrapping ErrExpired; the checks and
// their order are those of Python's cryptography package (which checks the
// clock skew only when a ttl is given).
func fernetDecrypt(key []byte, token string, ttl time.Duration, now time.Time) ([]byte, error) {
	data, err := base64.URLEncoding.DecodeString(token)
	if err != nil || len(data) < fernetHeader+aes.BlockSize+fernetMACSize || data[0] != fernetVersion {
		return nil, errTokenFormat
	}
	stamp := int64(binary.BigEndian.Uint64(data[1:9]))
	if ttl > 0 {
		if stamp+int64(ttl/time.Second) < now.Unix() {
			return nil, ErrExpired
		}
		if now.Unix()+int64(fernetMaxSkew/time.Second) < stamp {
			return nil, errTokenFuture
		}
	}
	signed, sum := data[:len(data)-fernetMACSize], data[len(data)-fernetMACSize:]
	mac := hmac.New(sha256.New, key[:16])
	mac.Write(signed)
	if !hmac.Equal(mac.Sum(nil), sum) {
		return nil, errTokenMAC
	}
	body := signed[fernetHeader:]
	if len(body)%aes.BlockSize != 0 {
		return nil, errTokenFormat
	}
	block, err := aes.NewCipher(key[16:])
	if err != nil {
		return nil, err
	}
	plain := make([]byte, len(body))
	cipher.NewCBCDecrypter(block, signed[9:fernetHeader]).CryptBlocks(plain, body)
	pad := int(plain[len(plain)-1])
	if pad == 0 || pad > aes.BlockSize {
		return nil, errTokenPad
	}
	var bad byte
	for _, b := range plain[len(plain)-pad:] {
		bad |= b ^ byte(pad)
	}
	if subtle.ConstantTimeByteEq(bad, 0) != 1 {
		return nil, errTokenPad
	}
	return plain[:len(plain)-pad], nil
}

package encrypted

// MasterKeyBytesForTest exposes the master-key decoding to the tests.
func MasterKeyBytesForTest(s string) []byte {
	b, err := masterBytes(s)
	if err != nil {
		return nil
	}
	return b
}

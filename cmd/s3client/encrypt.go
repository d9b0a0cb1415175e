package main

import (
	"bytes"
	"crypto/rand"
	"fmt"

	"github.com/secure-io/sio-go"
	"golang.org/x/crypto/argon2"
)

// The encrypted bodies of MinIO's admin API (add-user, and the policy attach of newer servers):
// MinIO decrypts them with the requesting user's secret key. The format, as MinIO's admin client
// writes it: a 32-byte random salt; one byte naming the key derivation and cipher (0: Argon2id and
// AES-256-GCM); the cipher's 8-byte nonce; the data sealed as an sio stream (github.com/secure-io/sio-go)
// under a 32-byte key Argon2id derives from the secret key and the salt (1 pass, 64 MiB, 4 lanes).
const (
	saltSize          = 32
	argon2idAESGCM    = 0x00
	argon2idTime      = 1
	argon2idMemoryKiB = 64 * 1024
	argon2idThreads   = 4
)

// encryptForAdmin seals data for MinIO's admin API under password (the secret key of the user who
// signs the request). Errors: the system's random source or the cipher failing.
func encryptForAdmin(password string, data []byte) ([]byte, error) {
	salt := make([]byte, saltSize)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	key := argon2.IDKey([]byte(password), salt, argon2idTime, argon2idMemoryKiB, argon2idThreads, 32)
	stream, err := sio.AES_256_GCM.Stream(key)
	if err != nil {
		return nil, fmt.Errorf("admin body cipher: %w", err)
	}
	nonce := make([]byte, stream.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	out.Write(salt)
	out.WriteByte(argon2idAESGCM)
	out.Write(nonce)
	w := stream.EncryptWriter(&out, nonce, nil)
	if _, err := w.Write(data); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

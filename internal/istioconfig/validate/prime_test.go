package validate

import "testing"

func TestIsPrime(t *testing.T) {
	for n, want := range map[uint64]bool{0: false, 1: true, 2: true, 3: true, 4: false, 9: false, 25: false, 65537: true, 65539: true, 5000011: true, 4999995: false, 65535: false} {
		if got := isPrime(n); got != want {
			t.Errorf("isPrime(%d) = %v, want %v", n, got, want)
		}
	}
}

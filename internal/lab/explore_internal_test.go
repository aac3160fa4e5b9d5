package lab

import "testing"

func TestFormats(t *testing.T) {
	for x, want := range map[float64]string{0.616: "0.616", 6.23: "6.23", 13.07: "13.1", 812.6: "813", 8126.4: "8,126", 1234567: "1,234,567", -4321: "-4,321"} {
		if got := num(x); got != want {
			t.Errorf("num(%v) = %q, want %q", x, got, want)
		}
	}
	for x, want := range map[float64]string{0: "0%", 0.051: "5.1%", -0.041: "-4.1%", 0.996: "100%", 1.087: "109%"} {
		if got := percent(x); got != want {
			t.Errorf("percent(%v) = %q, want %q", x, got, want)
		}
	}
	for r, want := range map[float64]string{0.65: "1.5×", 1.5: "1.5×", 37.4: "37×", 1169.3: "1169×"} {
		if got := times(r); got != want {
			t.Errorf("times(%v) = %q, want %q", r, got, want)
		}
	}
}

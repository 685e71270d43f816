package clock

import "testing"

func TestFormatOverAnHour(t *testing.T) {
	if got := Format(4530); got != "1:15:30" {
		t.Errorf("Format(4530) = %q, want %q", got, "1:15:30")
	}
}

func TestFormatUnderAnHour(t *testing.T) {
	if got := Format(754); got != "12:34" {
		t.Errorf("Format(754) = %q, want %q", got, "12:34")
	}
}

func TestFormatNegative(t *testing.T) {
	if got := Format(-754); got != "-12:34" {
		t.Errorf("Format(-754) = %q, want %q", got, "-12:34")
	}
}

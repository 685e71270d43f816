package clock

import "testing"

func TestFormatAroundTheHour(t *testing.T) {
	cases := []struct {
		name    string
		seconds int
		want    string
	}{
		{"zero", 0, "0:00"},
		{"one second short of an hour", 3599, "59:59"},
		{"exactly one hour", 3600, "1:00:00"},
		{"one hour and a second", 3601, "1:00:01"},
		{"minus one hour", -3600, "-1:00:00"},
		{"ten hours", 36000, "10:00:00"},
	}
	for _, tc := range cases {
		tc := tc
		t.Run(tc.name, func(t *testing.T) {
			if got := Format(tc.seconds); got != tc.want {
				t.Errorf("Format(%d) = %q, want %q", tc.seconds, got, tc.want)
			}
		})
	}
}

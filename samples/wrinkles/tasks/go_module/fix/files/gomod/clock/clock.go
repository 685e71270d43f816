// Package clock formats hike durations the way hikers read split times.
package clock

import "fmt"

// Format gives seconds as H:MM:SS, or M:SS under an hour; negative durations get a
// leading minus sign.
func Format(seconds int) string {
	sign := ""
	if seconds < 0 {
		sign, seconds = "-", -seconds
	}
	if seconds >= 3600 {
		return fmt.Sprintf("%s%d:%02d:%02d", sign, seconds/3600, seconds%3600/60, seconds%60)
	}
	return fmt.Sprintf("%s%d:%02d", sign, seconds/60, seconds%60)
}

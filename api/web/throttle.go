package web

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
)

// TooManyRequests is the answer to a client that must wait before trying
// again: it sets Retry-After on c to wait in whole seconds (at least one)
// and returns the 429 error to hand to c.Error.
func TooManyRequests(c *gin.Context, wait time.Duration) error {
	secs := max(int((wait+time.Second-1)/time.Second), 1)
	c.Header("Retry-After", strconv.Itoa(secs))
	return Errorf(http.StatusTooManyRequests, "Too many failed attempts. Try again in %d seconds.", secs)
}

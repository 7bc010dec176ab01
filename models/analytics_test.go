package models_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/models"
	"github.com/thehub/hub/models/dbtest"
)

// TestSiteAnswers: the kept answer to a question is the newest one (an
// older answer arriving late does not replace it), found only when young
// enough, told apart by kind, site, path and variant, and pruned by age.
func TestSiteAnswers(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Microsecond)
		put := func(kind, path, variant, body string, at time.Time) {
			require.NoError(t, models.PutSiteAnswer(ctx, db, &models.SiteAnswer{Kind: kind, Site: "east", Path: path,
				Variant: variant, ComputedAt: at, Body: body}))
		}
		put(models.AnswerAnalytics, "/p", "", `{"n":1}`, now.Add(-time.Minute))
		put(models.AnswerAnalytics, "/p", "", `{"n":2}`, now)
		put(models.AnswerAnalytics, "/p", "", `{"n":0}`, now.Add(-time.Hour)) // late and older: ignored
		put(models.AnswerListing, "/p", "limit=20", `{"l":1}`, now.Add(-10*24*time.Hour))

		a, ok, err := models.FreshSiteAnswer(ctx, db, models.AnswerAnalytics, "east", "/p", "", now.Add(-time.Second))
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, `{"n":2}`, a.Body)
		require.True(t, now.Equal(a.ComputedAt), "%v %v", now, a.ComputedAt)
		_, ok, err = models.FreshSiteAnswer(ctx, db, models.AnswerAnalytics, "east", "/p", "", now.Add(time.Second))
		require.NoError(t, err)
		require.False(t, ok, "too old")
		_, ok, err = models.FreshSiteAnswer(ctx, db, models.AnswerAnalytics, "west", "/p", "", time.Time{})
		require.NoError(t, err)
		require.False(t, ok, "another site")
		a, ok, err = models.FreshSiteAnswer(ctx, db, models.AnswerListing, "east", "/p", "limit=20", time.Time{})
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, `{"l":1}`, a.Body)

		n, err := models.PruneSiteAnswers(ctx, db, now.Add(-models.SiteAnswersKept))
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		_, ok, err = models.FreshSiteAnswer(ctx, db, models.AnswerListing, "east", "/p", "limit=20", time.Time{})
		require.NoError(t, err)
		require.False(t, ok)
	})
}

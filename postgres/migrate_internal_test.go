package postgres

import (
	"fmt"
	"testing"
)

// TestMigrationSQL keeps the exported MigrationSQL and the template Migrate
// uses for any table name in step.
func TestMigrationSQL(t *testing.T) {
	if got := fmt.Sprintf(migrationTemplate, DefaultTable); got != MigrationSQL {
		t.Fatalf("migrationTemplate with %q=\n%s\nwant MigrationSQL=\n%s", DefaultTable, got, MigrationSQL)
	}
}

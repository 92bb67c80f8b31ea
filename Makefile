# skiplock: `make run` serves on 127.0.0.1:8787, `make test` runs every test.
# Without DATABASE_URL both start a private PostgreSQL cluster under .data/ (scripts/pg.sh; as root, in a
# folder of its own under /var/lib/skiplock-pg that .data/pg points to).

SHELL := /bin/bash
.ONESHELL:
.SHELLFLAGS := -euo pipefail -c

VENV := .venv

# The checked statements of src/store/ (`query!`) compile from their offline data in .sqlx/, as on a fresh
# clone without DATABASE_URL, even where a target sets DATABASE_URL (to a database that may not be
# migrated yet); `make lint` checks that data against the migrations (docs/testing.md, "Checked SQL").
export SQLX_OFFLINE ?= true

.PHONY: bench-usage-export bench-flow bench-dead-receiver bench-schedules soak upgrade-test bench-flood bench-cluster-rate bench-sizes bench-delete run test lint latency bench bench-quick bench-long-poll bench-horizon chaos ha-test fuzz db-up db-down venv clean

# The service's database: the private cluster's `skiplock` database, or DATABASE_URL as given.
define service_db
if [ -z "$${DATABASE_URL:-}" ]; then
  base="$$(scripts/pg.sh start)"
  [ -n "$$base" ]
  psql -q "$$base" -tAc "select 1 from pg_database where datname = 'skiplock'" | grep -q 1 \
    || psql -q "$$base" -c "create database skiplock" >/dev/null
  export DATABASE_URL="$${base%/*}/skiplock"
fi
endef

# DATABASE_URL as given, or the private cluster's server (the benchmarks make databases of their own on it).
define cluster_db
if [ -z "$${DATABASE_URL:-}" ]; then url="$$(scripts/pg.sh start)"; export DATABASE_URL="$$url"; fi
endef

run:
	@$(service_db)
	cargo build --release --quiet
	./target/release/skiplock migrate >/dev/null
	mkdir -p .data
	account=$$(sed -E 's/.*"account_id":"([0-9a-f]+)".*/\1/' .data/default-account.json 2>/dev/null || true)
	# A kept account that this database does not have (a new database, say) is made again.
	if [ -z "$$account" ] || ! psql -q "$$DATABASE_URL" -tAc "select 1 from accounts where id = '$$account'" | grep -q 1; then
	  ./target/release/skiplock account create --name default > .data/default-account.json
	  account=$$(sed -E 's/.*"account_id":"([0-9a-f]+)".*/\1/' .data/default-account.json)
	fi
	token=$$(sed -E 's/.*"token":"([^"]+)".*/\1/' .data/default-account.json)
	echo "skiplock on http://$${SKIPLOCK_BIND:-127.0.0.1:8787}"
	echo "  account: $$account"
	echo "  token:   $$token   (kept in .data/default-account.json)"
	exec ./target/release/skiplock serve

# The Python tools the tests drive (the official Cloudflare SDK), in an ignored virtualenv.
venv: $(VENV)/.ready
$(VENV)/.ready: tests/sdk/requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/sdk/requirements.txt
	touch $@

test: venv
	@scripts/test-deps.sh
	bash tests/e2e/setup.sh
	bash tests/clients/setup.sh
	scripts/fuzz.sh 10
	$(cluster_db)
	scripts/statement-audit.sh reset
	cargo test --workspace --quiet -- --test-threads=6
	# The statement audit: every statement of src/store/ ran in the suite above (docs/testing.md).
	scripts/statement-audit.sh check
	# The high-availability test (docs/deploy.md), on the debug binaries the tests just built: about 100 s.
	cargo build --workspace --bins --quiet
	scripts/ha/run.sh target/debug
	# The rolling upgrade from the previous release (docs/deploy.md, "Upgrading"): about 30 s, and the first
	# time a minute or two more to build that release.
	scripts/upgrade/run.sh $(UPGRADE_FROM) target/debug

# Publish -> webhook latency at max_wait_time_ms = 0 and 1,000 messages/s (docs/benchmarks.md).
latency:
	@$(cluster_db)
	cargo build --release --quiet --workspace --bins
	./target/release/skiplock-bench latency --rate $${RATE:-1000} --seconds $${SECONDS_:-20}

# W1-W5 side by side with the raw SQL ceiling and pgmq, each on a private cluster of its own
# (docs/benchmarks.md). bench-quick runs in under 3 minutes; bench takes about an hour.
bench:
	@cargo build --release --quiet --workspace --bins
	./target/release/skiplock-bench suite

bench-quick:
	@cargo build --release --quiet --workspace --bins
	./target/release/skiplock-bench suite --quick

# W7 publish -> long-poll receive latency at 1,000 messages/s with 16 pullers waiting, and the CPU that
# 1,000 idle waiting pulls cost (docs/benchmarks.md), each on a fresh database: about 3 minutes.
bench-long-poll:
	@$(cluster_db)
	cargo build --release --quiet --workspace --bins
	./target/release/skiplock-bench long-poll

# Wrong-token floods beside a good tenant publishing 100 msg/s: its p99 against alone, the flood's rate and
# the node's peak RSS (docs/benchmarks.md, "Wrong-token floods"): about 2 minutes.
bench-flood:
	@$(cluster_db)
	cargo build --release --quiet --workspace --bins
	./target/release/skiplock-bench flood

# The operator's usage export (docs/benchmarks.md): a month of usage of 100,000 accounts (generated rows) as
# CSV per day and per month; the time to the last byte and the node's peak memory. About a minute.
bench-usage-export:
	@$(cluster_db)
	cargo build --release --quiet --workspace --bins
	./target/release/skiplock-bench usage-export $${USAGE_EXPORT_ARGS:-}

# W11 cluster-wide rate: an account on a plan of 2,000 published messages/s, through one node and then two
# (docs/benchmarks.md, "Rates across nodes"): about a minute.
bench-cluster-rate:
	@$(cluster_db)
	cargo build --release --quiet --workspace --bins
	./target/release/skiplock-bench cluster-rate

# W13 message sizes: W1 and W2 with 1 MiB bodies beside 1 KiB ones, in messages/s and MB/s, for an account
# on a plan that allows 1 MiB messages (docs/benchmarks.md, "Message sizes"): about a minute.
bench-sizes:
	@$(cluster_db)
	cargo build --release --quiet --workspace --bins
	./target/release/skiplock-bench sizes

# Flow control: 1,000 keys each limited to parallelism 2 and 20 messages/s, drained by pull consumers and by
# a webhook consumer on two nodes, and again without limits (docs/benchmarks.md, "Flow control"): about
# 4 minutes.
bench-flow:
	@$(cluster_db)
	cargo build --release --quiet --workspace --bins
	./target/release/skiplock-bench flow

# A dead receiver: 100,000 messages due for a webhook endpoint that refuses connections for a minute, then
# comes back (docs/benchmarks.md, "A dead receiver"): about 3 minutes.
bench-dead-receiver:
	@$(cluster_db)
	cargo build --release --quiet --workspace --bins
	./target/release/skiplock-bench dead-receiver

# Schedules: 10,000 firing every minute; tick to commit and the CPU between ticks (docs/benchmarks.md,
# "Schedules"): about 4 minutes.
bench-schedules:
	@$(cluster_db)
	cargo build --release --quiet --workspace --bins
	./target/release/skiplock-bench schedules

# W12 delete under fire: an account of 100,000 messages over 100 queues deleted while a neighbour publishes
# 1,000 msg/s through another node, the node working on it SIGKILLed part-way (docs/benchmarks.md): a few minutes.
bench-delete:
	@$(cluster_db)
	cargo build --release --quiet --workspace --bins
	./target/release/skiplock-bench delete-under-fire

# W10 held horizon: W4 at 1,000 messages/s beside a W1 + W2 cycle of 100,000 messages each minute, for 3
# minutes before, 10 with a snapshot held by another connection and 3 after, on a fresh database: about
# 17 minutes. HORIZON_ARGS passes flags (a short trial: --before-minutes 1 --held-minutes 2
# --after-minutes 1 --cycle-messages 20000); scripts/plot-horizon.py draws the JSON it writes.
bench-horizon:
	@$(cluster_db)
	cargo build --release --quiet --workspace --bins
	./target/release/skiplock-bench horizon $${HORIZON_ARGS:-}

# The long crash suite: 5 minutes per mode (pull, webhook, ordered keys, schedules, fan-out), the server
# SIGKILLed every 0-3 s, PostgreSQL restarted at every 5th kill. Figures in bench/results/chaos-*.md.
chaos:
	@cargo build --release --quiet --workspace --bins
	mkdir -p bench/results
	out=bench/results/chaos-$$(date -u +%Y%m%dT%H%M%SZ).md
	for mode in pull webhook ordered schedules fan-out; do
	  ./target/release/skiplock-bench chaos --mode $$mode --seconds $${CHAOS_SECONDS:-300} --kill-every-ms 3000 --pg-restart-every 5 | tee -a $$out
	done

# High availability (docs/deploy.md): etcd, two Patroni-managed PostgreSQL instances behind HAProxy and four
# skiplock nodes under load, through node kills, a switchover and a failover (installs patroni, etcd-server
# and haproxy as root when they are missing).
ha-test:
	@cargo build --release --quiet --workspace --bins
	scripts/ha/run.sh target/release

# Rolling upgrade (docs/deploy.md, "Upgrading"): nodes of the previous release under load, the schema
# migrated by this one, the nodes replaced one by one; the crash suite's checker judges the history.
# UPGRADE_FROM names the previous release (a commit of this repository); `make test` runs it.
UPGRADE_FROM ?= 282ab24
upgrade-test:
	@cargo build --quiet --workspace --bins
	scripts/upgrade/run.sh $(UPGRADE_FROM) target/debug

# The soak (docs/reliability.md, "Soak"): an hour of mixed load (300 messages/s over 100 accounts: batch and
# single publishes, long polls with lease extension, a slow and a failing webhook, ordering and idempotency
# keys, a redrive) on two nodes and a PostgreSQL cluster of its own, a node SIGKILLed every 5 minutes,
# PostgreSQL restarted once and a snapshot held open 10 minutes; judged on lost messages, RSS growth, p99
# stability and flat table and index sizes. The result, bench/results/soak-<time>.json, and one chart per
# figure (matplotlib, installed into .venv when missing) go to SOAK_OUT (docs/soak/), also when a verdict
# fails. SOAK_ARGS passes flags; a short trial: SOAK_ARGS="--minutes 4 --kill-every-secs 100
# --reference-minute 2" SOAK_OUT=/tmp/soak make soak. Not part of `make test`.
soak:
	@cargo build --release --quiet --workspace --bins
	out="$${SOAK_OUT:-docs/soak}"
	started=$$(mktemp)
	status=0
	./target/release/skiplock-bench soak $${SOAK_ARGS:-} || status=$$?
	result=$$(find bench/results -maxdepth 1 -name 'soak-*.json' -newer "$$started" | sort | tail -n 1)
	rm -f "$$started"
	if [ -n "$$result" ]; then
	  [ -x $(VENV)/bin/python ] || python3 -m venv $(VENV)
	  $(VENV)/bin/python -c 'import matplotlib' 2>/dev/null \
	    || $(VENV)/bin/pip install --quiet --disable-pip-version-check matplotlib
	  mkdir -p "$$out"
	  cp "$$result" "$$out/soak.json"
	  $(VENV)/bin/python scripts/plot-soak.py "$$result" "$$out"
	fi
	exit $$status

# The fuzz targets (token, lease id and webhook-answer parsers), a minute each; make test runs 10 s each.
fuzz:
	@scripts/fuzz.sh $${FUZZ_SECONDS:-60}

lint:
	@python3 scripts/check-doc-links.py
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --quiet -- -D warnings
	# The offline data of the checked statements (.sqlx/) is what the migrations give: prepared again
	# against a database migrated afresh (skiplock_lint, on the private cluster or DATABASE_URL's server).
	scripts/sqlx-cli.sh
	if [ -z "$${DATABASE_URL:-}" ]; then base="$$(scripts/pg.sh start)"; else base="$$DATABASE_URL"; fi
	[ -n "$$base" ]
	lint_url="$${base%/*}/skiplock_lint"
	psql -q "$$base" -c "set client_min_messages = warning" -c "drop database if exists skiplock_lint" \
	  -c "create database skiplock_lint"
	sqlx migrate run --source migrations --database-url "$$lint_url" >/dev/null
	DATABASE_URL="$$lint_url" cargo sqlx prepare --check --workspace -- --all-targets --quiet

db-up:
	@scripts/pg.sh start

db-down:
	@scripts/pg.sh stop

clean:
	@scripts/pg.sh destroy
	rm -rf .data $(VENV) target

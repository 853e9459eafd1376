/* ovs_cls: OVS 3.1's own classifier (lib/classifier.c) run over a workload file written by
 * ferrovs's `classifier-bench --with-ovs-cls`, so that both classifiers hold the same rules
 * and look up the same keys in the same order, or insert the same rules.
 *
 *   ovs_cls WORKLOAD [--lookups N] [--reps N] [--prios] [--serve] [--no-tries]
 *   ovs_cls WORKLOAD --insert [--more N] [--batch N] [--reps N] [--no-tries]
 *
 * The workload file is line based (`#` starts a comment line):
 *
 *   R <priority> <field>=<value>/<mask> ...    a rule (fields not named are wildcarded)
 *   H <field>=<value> ...                      a key that should match some rule
 *   M <field>=<value> ...                      a key that should match no rule
 *   B <priority> <field>=<value>/<mask> ...    (--insert) a rule of the full table; without
 *                                              B lines, the R rules are the full table
 *   X <priority> <field>=<value>/<mask> ...    (--insert) a rule inserted into the full table
 *
 * Fields: in_port dl_type nw_src nw_dst nw_proto nw_ttl tp_src tp_dst; values and masks are
 * unsigned integers in C syntax (0x... hex), host order, as ferrovs's `FlowKey` holds them.
 *
 * Set-up mirrors tests/test-classifier.c's benchmark(): classifier_init with
 * flow_segment_u64s (staged lookup), prefix tries on nw_dst and nw_src (OVS's default
 * `prefixes` for an OpenFlow table, as ferrovs's default), every rule inserted in
 * OVS_VERSION_MIN and looked up in it, one thread. Unlike that benchmark, the keys are taken
 * in order, cycling, as ferrovs's benchmark takes them. --no-tries leaves the prefix tries
 * out, as classifier-bench's --no-tries does.
 *
 * Output (one line each, `key=value` pairs):
 *   ovs-cls rules= subtables= replaced= insert= hit-keys= miss-keys= matched-hits=
 *       matched-misses= flow-bytes=        after the build; matched-* count keys that found a
 *                                          rule, one untimed lookup each
 *   ovs-cls-wc kind=hit|miss bits= other= in_port= ... tp_dst=
 *                                          un-wildcarded bits per lookup, averaged over the
 *                                          keys: `bits` over the fields above, `other` over
 *                                          the rest of struct flow, then per field
 *   ovs-cls-prios kind=hit|miss P P ...    (--prios) each key's matched priority, -1 none
 *   ovs-cls-rep hits_nowc= hits_wc= misses_nowc= misses_wc=
 *                                          one repetition: lookups/s over N lookups of the
 *                                          hit keys and of the miss keys, wildcard tracking
 *                                          off and on (flow_wildcards_init_catchall before
 *                                          each lookup with tracking, as OVS's benchmark)
 *   ovs-cls-median ...                     the same, the median of the repetitions
 *
 * --serve: after the build, one repetition per line read from stdin (the caller alternates
 * its own lookups with OVS's, without rebuilding either table), until end of input.
 *
 * --insert: OVS's insertion figures instead of lookups, as ofproto adds rules (see
 * run_inserts()), each repetition from a classifier built afresh (builds and teardowns not
 * timed); medians of --reps repetitions:
 *   ovs-cls-insert into=empty rules= single=R/s batched=R/s subtables=
 *                                          the R rules into an empty classifier: one flow_mod
 *                                          each (single), and one bundle (batched)
 *   ovs-cls-insert into=B rules=N single=R/s batched=R/s subtables=
 *                                          the first N (--more, default all) X rules into the
 *                                          B rules (B: their count), the same two ways
 *   ovs-cls-batch into=B rules=N commit=Ss rule-init=Ss each=S/S/..
 *                                          the first N (--batch, default all) X rules into
 *                                          the B rules as one bundle's atomic commit;
 *                                          rule-init: making their cls_rules, which OVS does
 *                                          as each message is added to the bundle, before
 *                                          the commit (not in `commit`) */

#include <config.h>

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "classifier.h"
#include "cmap.h"
#include "flow.h"
#include "openvswitch/dynamic-string.h"
#include "openvswitch/match.h"
#include "openvswitch/meta-flow.h"
#include "ovs-atomic.h"
#include "ovs-rcu.h"
#include "util.h"
#include "versions.h"

/* One field of the workload format: where it sits in struct flow and how wide it is. */
struct field {
    const char *name;
    size_t ofs;         /* offsetof(struct flow, ...). */
    int size;           /* Bytes: 1, 2 or 4. */
    bool be;            /* Network byte order in struct flow. */
};

static const struct field fields[] = {
    { "in_port", offsetof(struct flow, in_port.ofp_port), 4, false },
    { "dl_type", offsetof(struct flow, dl_type), 2, true },
    { "nw_src", offsetof(struct flow, nw_src), 4, true },
    { "nw_dst", offsetof(struct flow, nw_dst), 4, true },
    { "nw_proto", offsetof(struct flow, nw_proto), 1, false },
    { "nw_ttl", offsetof(struct flow, nw_ttl), 1, false },
    { "tp_src", offsetof(struct flow, tp_src), 2, true },
    { "tp_dst", offsetof(struct flow, tp_dst), 2, true },
};
#define N_FIELDS ARRAY_SIZE(fields)

/* A parsed rule or key, before it becomes a cls_rule or a struct flow. */
struct spec {
    int priority;
    uint64_t value[N_FIELDS];
    uint64_t mask[N_FIELDS];
};

struct specs {
    struct spec *v;
    size_t n, allocated;
};

static void
put_field(struct flow *flow, const struct field *f, uint64_t v)
{
    uint8_t *p = (uint8_t *) flow + f->ofs;

    if (f->size == 1) {
        *p = v;
    } else if (f->size == 2) {
        uint16_t x = f->be ? htons(v) : v;
        memcpy(p, &x, 2);
    } else {
        uint32_t x = f->be ? htonl(v) : v;
        memcpy(p, &x, 4);
    }
}

static uint64_t
get_field(const struct flow *flow, const struct field *f)
{
    const uint8_t *p = (const uint8_t *) flow + f->ofs;

    if (f->size == 1) {
        return *p;
    } else if (f->size == 2) {
        uint16_t x;
        memcpy(&x, p, 2);
        return f->be ? ntohs(x) : x;
    } else {
        uint32_t x;
        memcpy(&x, p, 4);
        return f->be ? ntohl(x) : x;
    }
}

static struct spec *
specs_add(struct specs *s)
{
    if (s->n == s->allocated) {
        s->v = x2nrealloc(s->v, &s->allocated, sizeof *s->v);
    }
    struct spec *sp = &s->v[s->n++];
    memset(sp, 0, sizeof *sp);
    return sp;
}

static uint64_t
parse_u64(const char *s, const char *what, int line_no)
{
    char *end;

    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s || *end) {
        ovs_fatal(0, "line %d: bad %s \"%s\"", line_no, what, s);
    }
    return v;
}

/* Parses `name=value[/mask]` into 'sp'; a key's field (no mask) gets an all-ones mask. */
static void
parse_token(char *tok, struct spec *sp, bool is_rule, int line_no)
{
    char *eq = strchr(tok, '=');
    if (!eq) {
        ovs_fatal(0, "line %d: expected field=value, got \"%s\"", line_no, tok);
    }
    *eq = '\0';
    char *val = eq + 1;
    char *slash = strchr(val, '/');
    if (slash) {
        *slash = '\0';
    }
    if (is_rule != (slash != NULL)) {
        ovs_fatal(0, "line %d: %s: a rule's field is value/mask, a key's a value",
                  line_no, tok);
    }
    for (size_t i = 0; i < N_FIELDS; i++) {
        if (!strcmp(tok, fields[i].name)) {
            uint64_t max = fields[i].size == 4 ? UINT32_MAX
                           : fields[i].size == 2 ? UINT16_MAX : UINT8_MAX;
            uint64_t v = parse_u64(val, "value", line_no);
            uint64_t m = slash ? parse_u64(slash + 1, "mask", line_no) : max;
            if (v > max || m > max) {
                ovs_fatal(0, "line %d: %s: value or mask wider than the field",
                          line_no, tok);
            }
            sp->value[i] = v;
            sp->mask[i] = m;
            return;
        }
    }
    ovs_fatal(0, "line %d: unknown field \"%s\"", line_no, tok);
}

/* The line kinds of the workload file. */
enum kind { K_RULE, K_HIT, K_MISS, K_BASE, K_EXTRA, N_KINDS };
static const char kind_letters[N_KINDS + 1] = "RHMBX";

/* Reads 'path' into 'specs', one list per line kind. */
static void
read_workload(const char *path, struct specs specs[N_KINDS])
{
    FILE *f = fopen(path, "r");
    if (!f) {
        ovs_fatal(errno, "%s", path);
    }
    char *line = NULL;
    size_t cap = 0;
    int line_no = 0;
    while (getline(&line, &cap, f) > 0) {
        line_no++;
        char *save = NULL;
        char *kind = strtok_r(line, " \t\n", &save);
        if (!kind || kind[0] == '#') {
            continue;
        }
        /* strtok_r() gives no empty token, so kind[0] is not the terminator. */
        const char *letter = kind[1] ? NULL : strchr(kind_letters, kind[0]);
        if (!letter) {
            ovs_fatal(0, "line %d: unknown line kind \"%s\"", line_no, kind);
        }
        enum kind k = letter - kind_letters;
        struct spec *sp = specs_add(&specs[k]);
        bool is_rule = k == K_RULE || k == K_BASE || k == K_EXTRA;
        if (is_rule) {
            char *prio = strtok_r(NULL, " \t\n", &save);
            if (!prio) {
                ovs_fatal(0, "line %d: rule without a priority", line_no);
            }
            uint64_t p = parse_u64(prio, "priority", line_no);
            if (p > INT_MAX - 1) {
                ovs_fatal(0, "line %d: priority %s too large", line_no, prio);
            }
            sp->priority = p;
        }
        for (char *tok; (tok = strtok_r(NULL, " \t\n", &save)); ) {
            parse_token(tok, sp, is_rule, line_no);
        }
    }
    free(line);
    fclose(f);
}

/* 'sp' as a match: its fields' values under their masks, the rest wildcarded. */
static void
spec_to_match(const struct spec *sp, struct match *match)
{
    match_init_catchall(match);
    for (size_t i = 0; i < N_FIELDS; i++) {
        put_field(&match->flow, &fields[i], sp->value[i] & sp->mask[i]);
        put_field(&match->wc.masks, &fields[i], sp->mask[i]);
    }
}

static struct flow *
make_flows(const struct specs *s)
{
    struct flow *flows = xzalloc(MAX(s->n, 1) * sizeof *flows);
    for (size_t k = 0; k < s->n; k++) {
        for (size_t i = 0; i < N_FIELDS; i++) {
            put_field(&flows[k], &fields[i], s->v[k].value[i]);
        }
    }
    return flows;
}

static double
now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Lookups/s of 'n' lookups over 'flows' in order, cycling. */
static double
time_lookups(const struct classifier *cls, struct flow *flows, size_t n_flows,
             size_t n, bool use_wc)
{
    size_t x = 0, found = 0;
    double t = now();
    for (size_t i = 0; i < n; i++) {
        const struct cls_rule *cr;
        if (use_wc) {
            struct flow_wildcards wc;
            flow_wildcards_init_catchall(&wc);
            cr = classifier_lookup(cls, OVS_VERSION_MIN, &flows[x], &wc);
        } else {
            cr = classifier_lookup(cls, OVS_VERSION_MIN, &flows[x], NULL);
        }
        found += cr != NULL;
        if (++x == n_flows) {
            x = 0;
        }
    }
    double rate = n / (now() - t);
    /* Keeps the lookups' results live. */
    if (found > n) {
        abort();
    }
    return rate;
}

/* One untimed lookup with tracking per key: how many found a rule, the un-wildcarded bits
 * (ovs-cls-wc line) and, with 'prios', each key's priority. */
static size_t
check_keys(const struct classifier *cls, struct flow *flows, size_t n_flows,
           const char *kind, bool prios)
{
    double bits[N_FIELDS] = { 0 };
    double total = 0, other = 0;
    size_t matched = 0;
    int *prio = xmalloc(MAX(n_flows, 1) * sizeof *prio);

    for (size_t k = 0; k < n_flows; k++) {
        struct flow_wildcards wc;
        flow_wildcards_init_catchall(&wc);
        const struct cls_rule *cr = classifier_lookup(cls, OVS_VERSION_MIN,
                                                      &flows[k], &wc);
        matched += cr != NULL;
        prio[k] = cr ? cr->priority : -1;

        const uint64_t *w = (const uint64_t *) &wc.masks;
        double all = 0;
        for (size_t i = 0; i < FLOW_U64S; i++) {
            all += count_1bits(w[i]);
        }
        double in_fields = 0;
        for (size_t i = 0; i < N_FIELDS; i++) {
            int b = count_1bits(get_field(&wc.masks, &fields[i]));
            bits[i] += b;
            in_fields += b;
        }
        total += in_fields;
        other += all - in_fields;
    }

    double n = MAX(n_flows, 1);
    printf("ovs-cls-wc kind=%s keys=%zu bits=%.2f other=%.2f", kind, n_flows,
           total / n, other / n);
    for (size_t i = 0; i < N_FIELDS; i++) {
        printf(" %s=%.2f", fields[i].name, bits[i] / n);
    }
    putchar('\n');
    if (prios) {
        printf("ovs-cls-prios kind=%s", kind);
        for (size_t k = 0; k < n_flows; k++) {
            printf(" %d", prio[k]);
        }
        putchar('\n');
    }
    free(prio);
    return matched;
}

static int
cmp_double(const void *a_, const void *b_)
{
    double a = *(const double *) a_, b = *(const double *) b_;
    return a < b ? -1 : a > b;
}

static double
median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* --insert: OVS's insertion figures.
 *
 * Rules come from a decoded flow_mod's minimatch (struct ofputil_flow_mod holds one), made
 * before anything is timed. OVS adds them as ofproto does (ofproto.c, OVS 3.1):
 *
 *   - a lone flow_mod (handle_flow_mod__()): the rule made from the minimatch
 *     (add_flow_init(): cls_rule_init_from_minimatch()), inserted in the next version
 *     (replace_rule_start(): classifier_insert() at tables_version + 1) with the classifier
 *     publishing at once, then that version made the lookups'
 *     (ofproto_bump_tables_version());
 *   - a bundle (do_bundle_commit()): the rules were made as each message was added to the
 *     bundle (handle_bundle_add()), not in the commit; the commit defers publication
 *     (ofproto_table_classifier_defer()), inserts every rule in the next version, publishes
 *     (ofproto_publish_classifiers()) and makes that version the lookups'.
 *
 * What ofproto adds around the classifier (classifier_find_rule_exactly() for an identical
 * rule, which classifier_insert() finds anyway, its own rule struct and indexes, the
 * datapath's revalidation) is left out: this is the classifier's share. */

/* A rule as a decoded flow_mod holds it. */
struct prepared {
    struct minimatch match;
    int priority;
};

static struct prepared *
prepare(const struct specs *s)
{
    struct prepared *p = xmalloc(MAX(s->n, 1) * sizeof *p);
    for (size_t k = 0; k < s->n; k++) {
        struct match match;
        spec_to_match(&s->v[k], &match);
        minimatch_init(&p[k].match, &match);
        p[k].priority = s->v[k].priority;
    }
    return p;
}

/* One OpenFlow table: its classifier, the writer's version ('tables_version' of struct
 * ofproto) and the lookups' (ofproto-dpif's atomic 'tables_version'). */
struct table {
    struct classifier cls;
    ovs_version_t version;
    ATOMIC(ovs_version_t) lookup_version;
};

static void
table_init(struct table *t, bool tries)
{
    static const enum mf_field_id trie_fields[] = { MFF_IPV4_DST, MFF_IPV4_SRC };
    classifier_init(&t->cls, flow_segment_u64s);
    if (tries && !classifier_set_prefix_fields(&t->cls, trie_fields,
                                               ARRAY_SIZE(trie_fields))) {
        ovs_fatal(0, "classifier_set_prefix_fields(nw_dst, nw_src) failed");
    }
    t->version = OVS_VERSION_MIN;
    atomic_init(&t->lookup_version, OVS_VERSION_MIN);
}

/* Lookups see 'version' from now on: ofproto's tables_version and ofproto-dpif's
 * set_tables_version(). */
static void
table_set_version(struct table *t, ovs_version_t version)
{
    t->version = version;
    atomic_store_explicit(&t->lookup_version, version, memory_order_release);
}

/* A lone flow_mod adding 'p' as 'cr'. */
static void
flow_mod_add(struct table *t, struct cls_rule *cr, const struct prepared *p)
{
    cls_rule_init_from_minimatch(cr, &p->match, p->priority);
    ovs_version_t version = t->version + 1;
    classifier_insert(&t->cls, cr, version, NULL, 0);
    table_set_version(t, version);
}

/* Makes the rules of 'n' flow_mods, as a bundle's messages are made when they are added. */
static void
make_rules(struct cls_rule *crs, const struct prepared *p, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        cls_rule_init_from_minimatch(&crs[k], &p[k].match, p[k].priority);
    }
}

/* A bundle's commit of 'n' flow_mods adding the rules 'crs', made beforehand. */
static void
bundle_commit(struct table *t, struct cls_rule *crs, size_t n)
{
    ovs_version_t version = t->version + 1;
    classifier_defer(&t->cls);
    for (size_t k = 0; k < n; k++) {
        classifier_insert(&t->cls, &crs[k], version, NULL, 0);
    }
    classifier_publish(&t->cls);
    table_set_version(t, version);
}

/* Removes and destroys the 'n' rules 'crs' of 't' (publication deferred, as
 * test-classifier.c's destroy_classifier()). */
static void
table_remove(struct table *t, struct cls_rule *crs, size_t n)
{
    classifier_defer(&t->cls);
    for (size_t k = 0; k < n; k++) {
        classifier_remove_assert(&t->cls, &crs[k]);
        cls_rule_destroy(&crs[k]);
    }
    classifier_publish(&t->cls);
}

/* Destroys 't', emptied by table_remove(), and runs what the classifier postponed. */
static void
table_destroy(struct table *t)
{
    ovs_assert(classifier_is_empty(&t->cls));
    classifier_destroy(&t->cls);
    ovsrcu_quiesce();
}

static void
check_count(const struct table *t, size_t n, const char *what)
{
    if (classifier_count(&t->cls) != n) {
        ovs_fatal(0, "%s: the classifier holds %d rules, not %zu", what,
                  classifier_count(&t->cls), n);
    }
}

/* A table holding the 'n_base' rules 'base', committed as one bundle (not timed). */
static void
table_load(struct table *t, bool tries, struct cls_rule *crs, const struct prepared *base,
           size_t n_base)
{
    table_init(t, tries);
    make_rules(crs, base, n_base);
    bundle_commit(t, crs, n_base);
    ovsrcu_quiesce();
    check_count(t, n_base, "full table");
}

/* The rules of one kind of insertion (into an empty table, or the first 'n' extra rules
 * into the full one) as single flow_mods then as one bundle: rules/s of each, the subtable
 * count, and in 'commit' and 'init' the bundle's commit and rule-making seconds. */
struct insert_times {
    double single, batched, commit, init;
    size_t subtables;
};

static struct insert_times
time_inserts(bool tries, const struct prepared *base, size_t n_base,
             struct cls_rule *base_crs, const struct prepared *add, size_t n,
             struct cls_rule *crs)
{
    struct insert_times r = { 0 };
    struct table t;

    /* Single flow_mods. */
    table_load(&t, tries, base_crs, base, n_base);
    double start = now();
    for (size_t k = 0; k < n; k++) {
        flow_mod_add(&t, &crs[k], &add[k]);
    }
    r.single = n / MAX(now() - start, 1e-9);
    check_count(&t, n_base + n, "single");
    r.subtables = cmap_count(&t.cls.subtables_map);
    table_remove(&t, crs, n);
    table_remove(&t, base_crs, n_base);
    table_destroy(&t);

    /* One bundle. */
    table_load(&t, tries, base_crs, base, n_base);
    start = now();
    make_rules(crs, add, n);
    double made = now();
    bundle_commit(&t, crs, n);
    double end = now();
    r.init = made - start;
    r.commit = end - made;
    r.batched = n / MAX(r.commit, 1e-9);
    check_count(&t, n_base + n, "bundle");
    table_remove(&t, crs, n);
    table_remove(&t, base_crs, n_base);
    table_destroy(&t);
    return r;
}

/* Prints --insert's lines: see the top of the file. */
static void
run_inserts(struct specs specs[N_KINDS], size_t n_more, size_t n_batch, size_t reps,
            bool tries)
{
    const struct specs *empty = &specs[K_RULE];
    const struct specs *full = specs[K_BASE].n ? &specs[K_BASE] : &specs[K_RULE];
    const struct specs *extra = &specs[K_EXTRA];
    n_more = MIN(n_more, extra->n);
    n_batch = MIN(n_batch, extra->n);

    struct prepared *p_empty = prepare(empty);
    struct prepared *p_full = full == empty ? p_empty : prepare(full);
    struct prepared *p_extra = prepare(extra);
    size_t most = MAX(MAX(empty->n, full->n), extra->n);
    struct cls_rule *crs = xmalloc(MAX(most, 1) * sizeof *crs);
    struct cls_rule *base_crs = xmalloc(MAX(full->n, 1) * sizeof *base_crs);

    /* Rules/s: into empty single, batched; into the full table single, batched. */
    double *v[4];
    for (int i = 0; i < 4; i++) {
        v[i] = xcalloc(reps, sizeof *v[i]);
    }
    double *commits = xcalloc(reps, sizeof *commits);
    double *inits = xcalloc(reps, sizeof *inits);
    size_t subtables[2] = { 0, 0 };
    for (size_t rep = 0; rep < reps; rep++) {
        struct insert_times e = time_inserts(tries, NULL, 0, base_crs, p_empty, empty->n,
                                             crs);
        v[0][rep] = e.single;
        v[1][rep] = e.batched;
        subtables[0] = e.subtables;
        if (n_more) {
            struct insert_times f = time_inserts(tries, p_full, full->n, base_crs, p_extra,
                                                 n_more, crs);
            v[2][rep] = f.single;
            v[3][rep] = f.batched;
            subtables[1] = f.subtables;
        }
        if (n_batch) {
            /* The atomic batch: a bundle only. */
            struct table t;
            table_load(&t, tries, base_crs, p_full, full->n);
            double start = now();
            make_rules(crs, p_extra, n_batch);
            double made = now();
            bundle_commit(&t, crs, n_batch);
            double end = now();
            inits[rep] = made - start;
            commits[rep] = end - made;
            check_count(&t, full->n + n_batch, "batch");
            table_remove(&t, crs, n_batch);
            table_remove(&t, base_crs, full->n);
            table_destroy(&t);
        }
    }

    printf("ovs-cls-insert into=empty rules=%zu single=%.0f/s batched=%.0f/s "
           "subtables=%zu\n", empty->n, median(v[0], reps), median(v[1], reps),
           subtables[0]);
    if (n_more) {
        printf("ovs-cls-insert into=%zu rules=%zu single=%.0f/s batched=%.0f/s "
               "subtables=%zu\n", full->n, n_more, median(v[2], reps),
               median(v[3], reps), subtables[1]);
    }
    if (n_batch) {
        /* Each in the order they ran, before median() sorts them. */
        struct ds each = DS_EMPTY_INITIALIZER;
        for (size_t rep = 0; rep < reps; rep++) {
            ds_put_format(&each, "%s%.4f", rep ? "/" : "", commits[rep]);
        }
        printf("ovs-cls-batch into=%zu rules=%zu commit=%.6fs rule-init=%.6fs each=%s\n",
               full->n, n_batch, median(commits, reps), median(inits, reps),
               ds_cstr(&each));
        ds_destroy(&each);
    }
}

#define N_CASES 4

static void
usage(void)
{
    fprintf(stderr, "usage: ovs_cls WORKLOAD [--lookups N] [--reps N] [--prios] "
            "[--serve] [--no-tries]\n"
            "       ovs_cls WORKLOAD --insert [--more N] [--batch N] [--reps N] "
            "[--no-tries]\n");
    exit(2);
}

int
main(int argc, char *argv[])
{
    const char *path = NULL;
    size_t n_lookups = 2000000, reps = 1, n_more = SIZE_MAX, n_batch = SIZE_MAX;
    bool prios = false, serve = false, tries = true, insert_mode = false;

    set_program_name(argv[0]);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--lookups") && i + 1 < argc) {
            n_lookups = parse_u64(argv[++i], "--lookups", 0);
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = parse_u64(argv[++i], "--reps", 0);
            reps = MAX(reps, 1);
        } else if (!strcmp(argv[i], "--prios")) {
            prios = true;
        } else if (!strcmp(argv[i], "--serve")) {
            serve = true;
        } else if (!strcmp(argv[i], "--no-tries")) {
            tries = false;
        } else if (!strcmp(argv[i], "--insert")) {
            insert_mode = true;
        } else if (!strcmp(argv[i], "--more") && i + 1 < argc) {
            n_more = parse_u64(argv[++i], "--more", 0);
        } else if (!strcmp(argv[i], "--batch") && i + 1 < argc) {
            n_batch = parse_u64(argv[++i], "--batch", 0);
        } else if (argv[i][0] != '-' && !path) {
            path = argv[i];
        } else {
            usage();
        }
    }
    if (!path) {
        usage();
    }

    struct specs specs[N_KINDS] = { { 0 } };
    read_workload(path, specs);
    if (insert_mode) {
        run_inserts(specs, n_more, n_batch, reps, tries);
        return 0;
    }
    struct specs rules = specs[K_RULE], hits = specs[K_HIT], misses = specs[K_MISS];

    struct classifier cls;
    static const enum mf_field_id trie_fields[] = { MFF_IPV4_DST, MFF_IPV4_SRC };
    classifier_init(&cls, flow_segment_u64s);
    if (tries && !classifier_set_prefix_fields(&cls, trie_fields,
                                               ARRAY_SIZE(trie_fields))) {
        ovs_fatal(0, "classifier_set_prefix_fields(nw_dst, nw_src) failed");
    }

    /* The rules stay where they are while the classifier holds them. */
    struct cls_rule *crs = xmalloc(MAX(rules.n, 1) * sizeof *crs);
    size_t replaced = 0;
    double t = now();
    for (size_t k = 0; k < rules.n; k++) {
        struct match match;
        spec_to_match(&rules.v[k], &match);
        cls_rule_init(&crs[k], &match, rules.v[k].priority);
        /* A duplicate (same match and priority) replaces the earlier rule, as a flow_mod
         * would; there should be none. */
        if (classifier_replace(&cls, &crs[k], OVS_VERSION_MIN, NULL, 0)) {
            replaced++;
        }
    }
    double insert = rules.n / MAX(now() - t, 1e-9);
    free(rules.v);

    struct flow *hit_flows = make_flows(&hits);
    struct flow *miss_flows = make_flows(&misses);
    size_t matched_hits = check_keys(&cls, hit_flows, hits.n, "hit", prios);
    size_t matched_misses = check_keys(&cls, miss_flows, misses.n, "miss", prios);
    printf("ovs-cls rules=%d subtables=%zu replaced=%zu insert=%.0f/s hit-keys=%zu "
           "miss-keys=%zu matched-hits=%zu matched-misses=%zu flow-bytes=%zu\n",
           classifier_count(&cls), cmap_count(&cls.subtables_map), replaced, insert,
           hits.n, misses.n, matched_hits, matched_misses, sizeof(struct flow));
    fflush(stdout);

    static const char *const names[N_CASES] = {
        "hits_nowc", "hits_wc", "misses_nowc", "misses_wc"
    };
    double *rates[N_CASES];
    for (int c = 0; c < N_CASES; c++) {
        rates[c] = xcalloc(reps, sizeof *rates[c]);
    }
    size_t done = 0;
    char cmd[64];
    while (serve ? fgets(cmd, sizeof cmd, stdin) != NULL : done < reps) {
        double r[N_CASES];
        for (int c = 0; c < N_CASES; c++) {
            bool miss = c >= 2;
            struct flow *flows = miss ? miss_flows : hit_flows;
            size_t n = miss ? misses.n : hits.n;
            r[c] = n ? time_lookups(&cls, flows, n, n_lookups, c & 1) : 0;
        }
        printf("ovs-cls-rep");
        for (int c = 0; c < N_CASES; c++) {
            printf(" %s=%.0f", names[c], r[c]);
            if (done < reps) {
                rates[c][done] = r[c];
            }
        }
        putchar('\n');
        fflush(stdout);
        done++;
    }
    if (!serve && done) {
        printf("ovs-cls-median");
        for (int c = 0; c < N_CASES; c++) {
            printf(" %s=%.0f", names[c], median(rates[c], done));
        }
        putchar('\n');
    }

    /* No classifier_destroy(): the process ends here, and the rules would have to be
     * removed first. */
    return 0;
}

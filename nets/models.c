/* The model registry (nets/models.h). */
#include "nets/models.h"

#include <stdio.h>
#include <string.h>

#include "core/util.h"

#define DT_MODEL_DECL_(id, name, info) extern const struct dt_model_kind_info info;
DT_MODEL_KIND_LIST(DT_MODEL_DECL_)
#undef DT_MODEL_DECL_

const char *const dt_model_kind_names[DT_MODEL_KIND_COUNT + 1] = {
#define DT_MODEL_NAME_(id, name, info) name,
    DT_MODEL_KIND_LIST(DT_MODEL_NAME_)
#undef DT_MODEL_NAME_
        NULL};

static const struct dt_model_kind_info *const kinds[DT_MODEL_KIND_COUNT] = {
#define DT_MODEL_ROW_(id, name, info) &info,
    DT_MODEL_KIND_LIST(DT_MODEL_ROW_)
#undef DT_MODEL_ROW_
};

const struct dt_model_kind_info *dt_model_kind(enum dt_model_kind kind)
{
    DT_ASSERT((int)kind >= 0 && kind < DT_MODEL_KIND_COUNT);
    DT_ASSERT_MSG(strcmp(kinds[kind]->name, dt_model_kind_names[kind]) == 0,
                  "a model kind's info names another kind");
    return kinds[kind];
}

/* Is `word` one of the space-separated words of `list`? */
static bool has_word(const char *list, const char *word)
{
    const size_t n = strlen(word);
    for (const char *p = list; p && *p;) {
        while (*p == ' ') p++;
        const size_t len = strcspn(p, " ");
        if (len == n && strncmp(p, word, n) == 0) return true;
        p += len;
    }
    return false;
}

bool dt_model_key_is_kind_specific(const char *key)
{
    for (int k = 0; k < DT_MODEL_KIND_COUNT; k++)
        if (has_word(kinds[k]->keys, key)) return true;
    return false;
}

bool dt_model_kind_reads(enum dt_model_kind kind, const char *key)
{
    return !dt_model_key_is_kind_specific(key) || has_word(dt_model_kind(kind)->keys, key);
}

void dt_model_kinds_reading(char *buf, size_t size, const char *key)
{
    int found[DT_MODEL_KIND_COUNT], n = 0;
    for (int k = 0; k < DT_MODEL_KIND_COUNT; k++)
        if (has_word(kinds[k]->keys, key)) found[n++] = k;
    size_t used = 0;
    if (size) buf[0] = '\0';
    for (int i = 0; i < n && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s",
                                 i == 0       ? ""
                                 : i + 1 == n ? " and "
                                              : ", ",
                                 dt_model_kind_names[found[i]]);
}

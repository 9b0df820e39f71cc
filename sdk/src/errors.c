/* Error names and texts from the one X-macro list in mcpg/errors.h. */
#include <mcpg/sdk.h>

const char *mcpg_strerror(int err) {
    switch (err) {
    case 0: return "ok";
#define MCPG__ERR_TEXT(name, value, text) case value: return text;
        MCPG_ERRNO_MAP(MCPG__ERR_TEXT)
#undef MCPG__ERR_TEXT
    default: return "unknown error";
    }
}

const char *mcpg_errname(int err) {
    switch (err) {
    case 0: return "MCPG_OK";
#define MCPG__ERR_NAME(name, value, text) case value: return "MCPG_" #name;
        MCPG_ERRNO_MAP(MCPG__ERR_NAME)
#undef MCPG__ERR_NAME
    default: return "unknown error";
    }
}

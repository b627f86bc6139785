/* tools/office: which files preview renders, the helper's answer read from
 * its output (markers, cut lines, pictures of other types dropped), the text
 * the model reads, and the prompt's "Documents" section from an image.json. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/agent/prompt.h"
#include "app/tools/office.h"
#include "lib/json.h"
#include "tk_test.h"

TEST(office_previewable_by_extension)
{
    CHECK(tools_office_previewable("/workspace/q3.pptx"));
    CHECK(tools_office_previewable("/workspace/a/B.PDF"));
    CHECK(tools_office_previewable("/workspace/s.xlsx"));
    CHECK(tools_office_previewable("/workspace/d.csv"));
    CHECK(!tools_office_previewable("/workspace/notes.txt"));
    CHECK(!tools_office_previewable("/workspace/x.pptx/readme"));
    CHECK(!tools_office_previewable("/workspace/pptx"));
}

static json_t *answer(const char *s, char *msg)
{
    return tools_office_answer(s, strlen(s), msg, 256);
}

TEST(office_answer_between_markers)
{
    char msg[256];
    /* noise before, the JSON cut into lines (as execd may cut it), the last answer wins */
    json_t *v = answer("hello\nTUSKO-OFFICE-BEGIN\n{\"x\":1}\nTUSKO-OFFICE-END\n"
                       "TUSKO-OFFICE-BEGIN\n{\"kind\":\"pages\",\"pa\nges\":[{\"page\":1,\"mime\":"
                       "\"image/png\",\"base64\":\"iVBO\"},{\"page\":2,\"mime\":\"text/html\","
                       "\"base64\":\"PGI+\"}]}\nTUSKO-OFFICE-END\n",
                       msg);
    CHECK(v != NULL);
    json_t *pages = json_object_get(v, "pages");
    CHECK_INT(json_array_size(pages), ==, 2);
    CHECK_STR(tk_json_str(json_array_get(pages, 0), "base64"), "iVBO");
    /* a picture the UI must not put in a data: URL of another type is dropped */
    CHECK(json_object_get(json_array_get(pages, 1), "base64") == NULL);
    json_decref(v);

    CHECK(answer("nothing here", msg) == NULL);
    CHECK(strstr(msg, "no answer") != NULL);
    CHECK(answer("TUSKO-OFFICE-BEGIN\n{\"a\":", msg) == NULL);
    CHECK(strstr(msg, "cut off") != NULL);
    CHECK(answer("TUSKO-OFFICE-BEGIN\n[1,2]\nTUSKO-OFFICE-END", msg) == NULL);
    CHECK(strstr(msg, "not JSON") != NULL);
}

TEST(office_preview_text_for_the_model)
{
    char err[128];
    const char *j =
        "{\"path\":\"/workspace/q3.pptx\",\"kind\":\"pages\",\"family\":\"slides\","
        "\"page_count\":40,\"first\":1,\"last\":30,\"rendered\":true,\"pages\":[{\"page\":1,"
        "\"mime\":\"image/png\",\"base64\":\"AAAA\",\"title\":\"Q3\",\"body\":\"Revenue\","
        "\"notes\":\"Say hello\"}]}";
    json_t *v = tk_json_parse(j, strlen(j), 1 << 20, err, sizeof err);
    char *t = tools_office_preview_text(v);
    CHECK(strstr(t, "40 slides; slides 1–30 of 40 shown to the user as pictures") != NULL);
    CHECK(strstr(t, "preview with pages \"31-40\"") != NULL);
    CHECK(strstr(t, "Slide 1\n  title: Q3\n  body: Revenue\n  notes: Say hello\n") != NULL);
    CHECK(strstr(t, "AAAA") == NULL);
    free(t);
    json_decref(v);
    const char *sj = "{\"path\":\"/workspace/s.xlsx\",\"kind\":\"sheets\",\"sheets\":[{\"name\":"
                     "\"Sales\",\"rows\":[[\"Region\",\"Total\"],[\"North\",\"44\"]],"
                     "\"total_rows\":900,\"total_cols\":2,\"truncated\":true}]}";
    v = tk_json_parse(sj, strlen(sj), 1 << 20, err, sizeof err);
    t = tools_office_preview_text(v);
    CHECK(strstr(t, "1 sheet, shown to the user as tables") != NULL);
    CHECK(strstr(t, "Sheet \"Sales\": 900 rows x 2 columns (the user sees the first 200") != NULL);
    CHECK(strstr(t, "North\t44\n") != NULL);
    free(t);
    json_decref(v);
}

static char *section_of(const char *content)
{
    char path[] = "/tmp/tusko-test-image-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK(write(fd, content, strlen(content)) == (ssize_t)strlen(content));
    close(fd);
    char *s = agent_prompt_documents(path);
    unlink(path);
    return s;
}

TEST(office_prompt_names_the_image_libraries)
{
    char *s = section_of("{\"document_libraries\":[{\"name\":\"openpyxl\",\"language\":"
                         "\"python\",\"version\":\"3.0.9\"},{\"name\":\"python-docx\","
                         "\"language\":\"python\",\"version\":\"0.8.11\"},{\"name\":"
                         "\"libreoffice\",\"language\":\"cli\",\"version\":\"\"},{\"name\":"
                         "\"pptxgenjs\",\"language\":\"node\",\"version\":\"4.0.1\"}]}");
    CHECK(strstr(s, "## Documents") != NULL);
    CHECK(strstr(s, "Python: openpyxl 3.0.9, python-docx 0.8.11.") != NULL);
    CHECK(strstr(s, "pptxgenjs 4.0.1") != NULL);
    CHECK(strstr(s, "python-pptx is NOT installed") != NULL);
    CHECK(strstr(s, "a picture of every slide") != NULL);
    free(s);
    s = section_of("{\"document_libraries\":[{\"name\":\"python-pptx\",\"language\":\"python\","
                   "\"version\":\"1.0.2\"},{\"name\":\"pptxgenjs\",\"language\":\"node\"}]}");
    CHECK(strstr(s, "python-pptx 1.0.2") != NULL);
    CHECK(strstr(s, "NOT installed") == NULL);
    CHECK(strstr(s, "text only") != NULL); /* no LibreOffice */
    free(s);
    s = section_of("{\"name\":\"tusko-sandbox\"}"); /* an older image: nothing named */
    CHECK_STR(s, "");
    free(s);
    s = agent_prompt_documents("/nonexistent/image.json");
    CHECK_STR(s, "");
    free(s);
}

TEST_MAIN()

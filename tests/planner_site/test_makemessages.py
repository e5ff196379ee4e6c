from planner_site.management.commands.makemessages import jinja_as_python


def test_a_jinja_templates_strings_reach_xgettext_as_calls_on_their_own_lines() -> None:
    source = (
        "{% macro m(n) -%}\n"
        '{{ _("One") }} {{ pgettext("verb", "Run") }}\n'
        '{{ ngettext("%(num)s step", "%(num)s steps", n) }} {{ words["not marked"] }}\n'
        '{{ gettext("Two %(x)s", x=n) }}{%- endmacro %}'
    )
    assert jinja_as_python(source).splitlines() == [
        "",
        "_('One'); pgettext('verb', 'Run'); ",
        "ngettext('%(num)s step', '%(num)s steps'); ",
        "gettext('Two %(x)s'); ",
    ]

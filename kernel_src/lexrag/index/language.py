"""Whether a question is written in English, told by its function words: the dictionary
translates such a question (:mod:`lexrag.index.dictionary`), the English route searches the laws'
English texts with it."""

from __future__ import annotations

import re

from lexrag.index.analyzer import ENGLISH_STOPWORDS

__all__ = ["is_english"]

_EN_STOP = ENGLISH_STOPWORDS
# German function words: Snowball's German stopword list, "dass" and "muß" added beside "daß" and "muss"
_DE_STOP = frozenset("aber alle allem allen aller alles als also am an ander andere anderem anderen anderer anderes anderm andern "
                     "anderr anders auch auf aus bei bin bis bist da damit dann der den des dem die das dass daß derselbe derselben "
                     "denselben desselben demselben dieselbe dieselben dasselbe dazu dein deine deinem deinen deiner deines denn "
                     "derer dessen dich dir du dies diese diesem diesen dieser dieses doch dort durch ein eine einem einen einer "
                     "eines einig einige einigem einigen einiger einiges einmal er ihn ihm es etwas euer eure eurem euren eurer "
                     "eures für gegen gewesen hab habe haben hat hatte hatten hier hin hinter ich mich mir ihr ihre ihrem ihren "
                     "ihrer ihres euch im in indem ins ist jede jedem jeden jeder jedes jene jenem jenen jener jenes jetzt kann "
                     "kein keine keinem keinen keiner keines können könnte machen man manche manchem manchen mancher manches mein "
                     "meine meinem meinen meiner meines mit muss muß musste nach nicht nichts noch nun nur ob oder ohne sehr sein "
                     "seine seinem seinen seiner seines selbst sich sie ihnen sind so solche solchem solchen solcher solches soll "
                     "sollte sondern sonst über um und uns unsere unserem unseren unser unseres unter viel vom von vor während war "
                     "waren warst was weg weil weiter welche welchem welchen welcher welches wenn werde werden wie wieder will wir "
                     "wird wirst wo wollen wollte würde würden zu zum zur zwar zwischen".split())
# Words both languages write ("Was kann A an B verlangen?", "What if A dies?"): they tell neither
_DE_EN_SHARED = (_EN_STOP & _DE_STOP) | frozenset("also am bin den die dies hat hin man nun um war".split())
# English words that open a question ("Does B owe A?"): one of them first is as good as a second function word
_EN_OPENERS = frozenset("what which who whom whose when where whether how why is are do does did has have had can could may "
                        "might must shall should would".split())
# French and Italian function words: a question in either is not English (Swiss questions may be in both)
_FR_IT_STOP = frozenset("le la les un une des du est sont et ou que qui dans pour par sur avec ne pas au aux ce cette il elle "
                        "lo gli una della delle dei che di è sono per con non nel nella il del".split())


def is_english(text: str) -> bool:
    """Whether a question reads as English by its function words: at least two English ones (or one
    that opens the question, ``_EN_OPENERS``: "Does B owe A?"), and more of them than German ones and
    than French and Italian ones (ties, and texts with none, are not English).

    Words of one letter and words in capitals never count: a party letter (``A``, ``B``, ``X``) is no
    article or pronoun, and ``OR`` (the Code of Obligations) no conjunction.
    Words both English and German write (``was``, ``an``, ``in``, ``so``, ``will``, ``hat``, ``die``;
    ``_DE_EN_SHARED``) count for neither, and German's function words are a full stopword list
    (``kann``, ``gegen``, ``wenn``, ``für``...), so "Was kann A an B verlangen?" is German and
    "What can A claim from B?" English."""
    words = re.findall(r"[^\W\d_]+", text)
    opens = bool(words) and words[0].lower() in _EN_OPENERS
    words = [w for w in (w.lower() for w in words if len(w) > 1 and not w.isupper()) if w not in _DE_EN_SHARED]
    en = sum((w in _EN_STOP or w in _EN_OPENERS) and w not in _FR_IT_STOP for w in words)
    de = sum(w in _DE_STOP for w in words)
    fr_it = sum(w in _FR_IT_STOP for w in words)
    return (en >= 2 or opens) and en > de and en > fr_it
